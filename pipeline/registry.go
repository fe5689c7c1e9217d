package pipeline

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Stage orders the filters of a chain: a route's chain runs its features'
// filters by stage, then by key. The gaps leave room for features to come.
type Stage int

const (
	// StageMark: response filters that must see every answer, refusals
	// included (deprecation headers).
	StageMark Stage = 100
	// StageChannel: how the client must connect (the https redirect),
	// before anything is asked of it.
	StageChannel Stage = 150
	// StageScreen: who may call at all (IP lists, WAF).
	StageScreen Stage = 200
	// StageAuth: who is calling (signatures, tokens).
	StageAuth Stage = 300
	// StageLimit: how much they may call (quotas, rate limits).
	StageLimit Stage = 400
	// StageProtect: whether the backend can take it (breakers).
	StageProtect Stage = 500
	// StageChoose: which backend (canary splits).
	StageChoose Stage = 600
	// StageRewrite: what the backend is asked (path and Host rewrites).
	StageRewrite Stage = 700
	// StageRecord: what is kept of the exchange (recording, mirroring).
	StageRecord Stage = 800
	// StageForward: the upstream request is built from everything before.
	StageForward Stage = 900
	// StageTranscode: the request becomes another protocol's (JSON to a
	// gRPC message) after everything that reads it as the client sent
	// it, and the answer comes back before anything that reads it.
	StageTranscode Stage = 950
)

// Scope says where a feature's setting may appear.
type Scope uint8

const (
	// ScopeRoute: a key of a route ("ip_acl: {...}" under routes[i]).
	ScopeRoute Scope = 1 << iota
	// ScopeGlobal: a top-level key whose filter screens every request
	// before routing (the global IP list).
	ScopeGlobal
)

// Feature is one pluggable filter: the package that owns it registers it
// once (from init) and owns its config struct, validation and state; the
// config package only finds the key and calls Build.
type Feature struct {
	// Key is the setting's name ("ip_acl", "rewrite", "deprecated").
	Key   string
	Stage Stage
	Scope Scope
	// Config returns a pointer to a new, empty config value of the
	// feature's own type; the setting is decoded into it, and keys the
	// type does not have are refused with their line.
	Config func() any
	// Build validates the decoded config and returns the filter (nil when
	// the setting asks for nothing). An error names the problem; config
	// adds the file, line and route.
	Build func(b *Build, cfg any) (Filter, error)
	// Always builds the feature for every route, with its empty config
	// on routes that do not set it: a setting with a default that must
	// apply to all (a route's importance).
	Always bool
}

// Build is what a feature's Build gets: the environment of the snapshot
// being built and the route it is for.
type Build struct {
	*Env
	// Route describes the route the filter is for; zero for ScopeGlobal.
	Route RouteInfo
}

// RouteInfo is what a feature may need to know of its route.
type RouteInfo struct {
	Name string
	// Prefix is the route's path prefix ("" for exact and regex routes).
	Prefix string
	// Forwards reports that the route's action sends the request upstream
	// (a service or a split), not a mock or an offline answer.
	Forwards bool
	// Service names the one service the route sends to; "" for a split,
	// a mock or an offline answer.
	Service string
}

// Env is the build environment of one config snapshot: the long-lived
// services every feature may use. The config package fills it.
type Env struct {
	// Now is the clock features read (non-decreasing wall time).
	Now func() time.Time
	// Logger is for build-time and background messages, never per request.
	Logger *zap.Logger
	// State holds what must outlive a reload (see State).
	State *StateBuild
	// ForOtherHosts says the configuration is checked for nodes other
	// than this one (a document bound for Redis): a file it names may be
	// on their disks only. An owner that reads such a file takes it as
	// present when this host has none, and says what it assumed through
	// Note.
	ForOtherHosts bool
	// Offline says the build only checks the configuration (tollgate
	// validate, a document bound for Redis): owners validate and build,
	// but connect nowhere and start nothing that runs in the background.
	Offline bool
	// Note records what a build assumed (nil: nothing is recorded).
	Note func(string)
	// shared holds objects built from top-level sections that features
	// refer to (consumers, the JWT verifier, the forwarding edge), by
	// typed key (Key).
	shared map[*keyID]any
}

var registry = struct {
	sync.RWMutex
	byKey map[string]Feature
}{byKey: map[string]Feature{}}

// Register adds a feature. It is meant for init functions, and panics on a
// duplicate or malformed registration, a programming error.
func Register(f Feature) {
	if f.Key == "" || f.Build == nil || f.Config == nil || f.Scope == 0 {
		panic("pipeline: Register needs a key, a scope, a Config and a Build")
	}
	if _, ok := LookupSection(f.Key); ok {
		panic(fmt.Sprintf("pipeline: feature %q is also a section", f.Key))
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.byKey[f.Key]; dup {
		panic(fmt.Sprintf("pipeline: feature %q registered twice", f.Key))
	}
	registry.byKey[f.Key] = f
}

// Lookup returns the feature registered under key.
func Lookup(key string) (Feature, bool) {
	registry.RLock()
	defer registry.RUnlock()
	f, ok := registry.byKey[key]
	return f, ok
}

// Features returns every registered feature in chain order (stage, then
// key).
func Features() []Feature {
	registry.RLock()
	out := make([]Feature, 0, len(registry.byKey))
	for _, f := range registry.byKey {
		out = append(out, f)
	}
	registry.RUnlock()
	slices.SortFunc(out, func(a, b Feature) int {
		if a.Stage != b.Stage {
			return int(a.Stage - b.Stage)
		}
		if a.Key < b.Key {
			return -1
		}
		return 1
	})
	return out
}
