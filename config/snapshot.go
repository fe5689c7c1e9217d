package config

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/cluster"
	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/internal/clock"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/route"
	"go.uber.org/zap"
)

// Snapshot is one compiled configuration. It is immutable: a request loads
// the current snapshot once and runs on it to the end, even if a reload
// swaps in a newer one meanwhile.
type Snapshot struct {
	Version uint64
	Source  string
	Loaded  time.Time
	// File is the effective configuration (file + env + defaults).
	File *File
	// Digest is the SHA-256 of the configuration text as read, so a file
	// watcher can tell whether the file differs from what is running.
	Digest [32]byte
	// ClusterVersion is the version in Redis a follower compiled this
	// from (config.source redis; what tollgate config status shows), 0
	// for a file. Version counts this process's loads instead.
	ClusterVersion uint64

	Limits codec.Limits
	Router route.Matcher
	Routes []*route.Route
	// Edge is what client: says about the edge (trusted proxies,
	// internal prefixes), shared with the services (pipeline.EdgeKey).
	Edge *pipeline.Edge
	// Global are the filters of top-level feature settings (ip_acl): they
	// screen every request before routing, in stage order.
	Global []pipeline.Filter
	// Default runs when no route matches and default_service is set;
	// else Fallback, a weighted choice among fallbacks, when set.
	Default  *pipeline.Chain
	Fallback *pipeline.Chain
	env      *pipeline.Env
	state    *pipeline.StateBuild
	// upstreams are the routes' way to the services (upstreams.go).
	upstreams pipeline.Upstreams

	// NotFound answers when nothing matches and there is no default.
	NotFound        *pipeline.Static
	NotFoundDefault *pipeline.Canned
}

// Compiler turns Files into Snapshots with increasing versions. It also
// owns the state that must outlive a reload: the Redis client, and State,
// where everything else is kept (upstream instances, nonce filters,
// revocation views, the features' state).
type Compiler struct {
	// State keeps what outlives a reload: instances and their pools,
	// nonce stores, revocation views, and the features' own state.
	State  *pipeline.State
	Clock  *clock.Clock
	Logger *zap.Logger // for the cluster client; nil = silent
	// Offline compiles without connecting anywhere (tollgate validate).
	Offline bool
	// ForOtherHosts compiles a configuration meant for other nodes (a
	// document bound for Redis): files it names may be on their disks
	// only, and Note hears what was assumed (pipeline.Env).
	ForOtherHosts bool
	Note          func(string)

	mu      sync.Mutex
	version uint64
	build   sync.Mutex

	stateMu sync.Mutex
	cluster *cluster.Client
}

// stateGrace is how long state a new snapshot dropped stays usable by the
// requests of the old one: longer than any request may run.
const stateGrace = time.Minute

// NewCompiler returns a compiler whose first snapshot is version 1.
func NewCompiler() *Compiler {
	return &Compiler{State: pipeline.NewState(stateGrace), Clock: clock.New(nil, nil)}
}

// Cluster returns the Redis client, nil in standalone mode or before the
// first snapshot that names one.
func (c *Compiler) Cluster() *cluster.Client {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	return c.cluster
}

// Env is the environment the snapshot was built in: what its sections
// shared (typed keys), for the parts of the process that report on them.
func (s *Snapshot) Env() *pipeline.Env { return s.env }

// Close releases the long-lived state, for a process that served its last
// request: the features' state (recordings are flushed), then the Redis
// client.
func (c *Compiler) Close() {
	c.State.Close()
	if cl := c.Cluster(); cl != nil {
		cl.Close()
	}
}

// Compile validates f (defaults must be applied) and builds a snapshot. A
// failure changes nothing: no version is used up, no instance is dropped.
func (c *Compiler) Compile(f *File, source string) (snap *Snapshot, err error) {
	defer func() { err = redactErr(err, f.expanded) }()
	if err := f.Validate(source); err != nil {
		return nil, err
	}
	c.build.Lock() // one build at a time: the state registry expects it
	defer c.build.Unlock()
	st := c.State.Begin()
	defer func() {
		if err != nil {
			st.Abort()
		}
	}()
	trusted, err := codec.ParsePrefixes(f.Client.TrustedProxies)
	if err != nil {
		return nil, &Error{File: source, Msg: "client.trusted_proxies: " + err.Error()}
	}
	s := &Snapshot{
		Source: source,
		Loaded: time.Now(),
		File:   f,
		Limits: codec.Limits{
			MaxHeaderBytes: f.Client.MaxHeaderBytes,
			MaxURIBytes:    f.Client.MaxURIBytes,
			MaxBodyBytes:   f.Client.MaxBodyBytes,
		},
		Edge: &pipeline.Edge{
			Trusted: trusted,
			Internal: codec.Internal{
				HeaderPrefixes: nonEmpty(*f.Client.InternalHeaderPrefixes),
				QueryPrefixes:  nonEmpty(*f.Client.InternalQueryPrefixes),
			},
		},
		NotFoundDefault: pipeline.NewCanned(404, "no route"),
		state:           st,
	}
	s.env = &pipeline.Env{Now: c.Clock.Now, Logger: c.logger(), State: st, ForOtherHosts: c.ForOtherHosts, Offline: c.Offline, Note: c.Note}
	if len(trusted) == 0 {
		s.Edge.Trusted = nil
	}
	// The tls section's owner adds its listener (Listeners.TLS).
	pipeline.ListenersKey.Set(s.env, pipeline.Listeners{Plain: f.Listen})
	pipeline.EdgeKey.Set(s.env, s.Edge)
	pipeline.NodeKey.Set(s.env, f.NodeID)
	cl, err := c.clusterClient(f)
	if err != nil {
		return nil, &Error{File: source, Msg: err.Error()}
	}
	shareCluster(s.env, f, cl)
	if err := provisionSections(s.env, f); err != nil {
		return nil, withFile(err, source)
	}
	s.upstreams = upstreamsOf(s.env)
	if err := checkServiceRefs(f, s.upstreams); err != nil {
		return nil, withFile(err, source)
	}
	global, err := buildFeatures(&pipeline.Build{Env: s.env}, f.Features, pipeline.ScopeGlobal)
	if err != nil {
		return nil, withFile(err, source)
	}
	s.Global = chainOrder(global)
	for i, rc := range f.Routes {
		r, err := s.compileRoute(rc, i)
		if err != nil {
			var ce *Error
			if errors.As(err, &ce) {
				ce.File = source
				if ce.Line > 0 && !strings.HasPrefix(ce.Msg, "route ") {
					ce.Msg = fmt.Sprintf("route %q: %s", rc.Name, ce.Msg)
				}
				return nil, ce
			}
			msg := fmt.Sprintf("route %q: %v", rc.Name, err)
			line, col := f.placeInRoute(i, rc.Line, err.Error())
			return nil, &Error{File: source, Line: line, Col: col, Msg: msg}
		}
		s.Routes = append(s.Routes, r)
	}
	table, err := route.NewTable(s.Routes)
	if err != nil {
		var re *route.RouteError
		if errors.As(err, &re) && re.Index < len(f.Routes) {
			return nil, &Error{File: source, Line: f.Routes[re.Index].Line, Msg: err.Error()}
		}
		return nil, &Error{File: source, Msg: err.Error()}
	}
	s.Router = table
	if f.DefaultService != "" {
		s.Default = s.forwardChain(f.DefaultService)
	}
	if len(f.Fallbacks) > 0 {
		s.Fallback = s.fallbackChain(f.Fallbacks)
	}
	if nf := f.NotFound; nf != nil {
		if s.NotFound, err = staticAnswer(nf, 404); err != nil {
			return nil, &Error{File: source, Msg: "not_found: " + err.Error()}
		}
	}

	c.mu.Lock()
	c.version++
	s.Version = c.version
	c.mu.Unlock()
	return s, nil
}

// Release tells the compiler that snap is now the live snapshot: state no
// longer used by it (instances, nonce stores, feature state) is dropped and
// released after the grace period, once the old snapshot's requests are
// done with it.
func (c *Compiler) Release(snap *Snapshot) {
	if snap.state != nil {
		snap.state.Commit()
	}
}

// Discard tells the compiler that snap will never go live (tollgate
// validate, a refused reload): the state only it asked for is released.
func (c *Compiler) Discard(snap *Snapshot) {
	if snap.state != nil {
		snap.state.Abort()
	}
}

func (c *Compiler) logger() *zap.Logger {
	if c.Logger == nil {
		return zap.NewNop()
	}
	return c.Logger
}

// Load reads path (or parses data when path is ""), applies env overrides
// and defaults, and compiles it.
func (c *Compiler) Load(path string, data []byte, lookup func(string) (string, bool)) (*Snapshot, error) {
	name := path
	if path == "" {
		name = "embedded demo config"
	} else {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("reading config: %w", err)
		}
	}
	f, err := ReadBytes(name, data, lookup)
	if err != nil {
		return nil, err
	}
	snap, err := c.Compile(f, name)
	if err != nil {
		return nil, err
	}
	snap.Digest = sha256.Sum256(data)
	return snap, nil
}

// withFile puts the file name on a configuration error.
func withFile(err error, source string) error {
	var ce *Error
	if errors.As(err, &ce) {
		ce.File = source
		return ce
	}
	return &Error{File: source, Msg: err.Error()}
}

// nonEmpty drops empty prefixes, which would match every name.
func nonEmpty(ss []string) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
