// Package discovery keeps services' instance sets from the registries the
// backends already use (etcd, DNS, …) instead of the configuration file.
//
// A provider is a package of its own that registers itself (Register)
// from init, as features do; operators configure it under the top-level
// `discovery:` section by its name, and a service asks it for instances
// with `discover: {from: NAME, name: …}`. The provider only reads its
// registry: keeping the last known set through outages, the grace before
// an empty set counts, saving the set on disk, logging, counting and
// handing sets to the balancers are this package's, the same for every
// provider.
package discovery

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"go.uber.org/zap"
)

// Instance is one backend a registry lists.
type Instance struct {
	// Addr is host:port, the host an IP address or a name.
	Addr string `json:"addr" yaml:"addr"`
	// Weight is the instance's share of requests relative to the others
	// (SRV weight, etcd metadata "weight"); 0 is read as 1.
	Weight int `json:"weight,omitempty" yaml:"weight,omitempty"`
	// Meta is what the registry says of the instance (etcd metadata,
	// Consul tags and meta): a route's split selects instances by it.
	Meta map[string]string `json:"meta,omitempty" yaml:"meta,omitempty"`
}

// Provider is a registry client built from its `discovery.NAME` settings.
// A provider that holds connections implements io.Closer: it is closed
// once no running configuration uses it.
type Provider interface {
	// Target checks one service's `discover` settings and returns what
	// to watch. decode decodes the whole `discover` mapping (from and
	// name included) into the provider's own type and refuses a key the
	// type does not have; Target must not reach the registry.
	Target(name string, decode func(into any) error) (Target, error)
}

// Target is one service's watch on a registry.
type Target interface {
	// Watch reports the target's whole instance set through update each
	// time it may have changed, until ctx ends, then returns. A failure
	// to read the registry (refused, an error answer, a timeout) goes to
	// fail, and Watch retries by itself with a back-off; it never calls
	// update for a failure: update means "the registry says this is the
	// set", an empty set included. Watch must not block in update's
	// caller for long: update copies what it needs and returns.
	Watch(ctx context.Context, update func([]Instance), fail func(error))
	// String names the target in logs, metrics and the admin API
	// ("etcd /services/orders/", "dns SRV _http._tcp.stock").
	String() string
}

// Env is what a provider's factory gets besides its settings.
type Env struct {
	Logger *zap.Logger
	// ForOtherHosts is set when a file is checked for another host: the
	// factory reads no file and dials nothing it could not on that host.
	ForOtherHosts bool
}

// Factory builds a provider from its settings: decode decodes the
// `discovery.NAME` mapping into the provider's own type, refusing keys it
// does not have. The factory validates; it must not reach the registry
// (a registry that is down at start is a failure Watch reports, never a
// config error).
type Factory func(decode func(into any) error, env Env) (Provider, error)

// Kind is a provider as its package registers it.
type Kind struct {
	// Name is the provider's key under `discovery:` and in `from:`.
	Name string
	// Settings returns a pointer to a new, empty value of the type New
	// decodes `discovery.NAME` into: the configuration checks keys
	// against it and finds its secret fields (secret:"true") in it.
	Settings func() any
	// New builds the provider.
	New Factory
}

var providers = struct {
	sync.RWMutex
	byName map[string]Kind
}{byName: map[string]Kind{}}

// Register adds a provider. It is meant for init functions and panics on
// a duplicate or an incomplete registration, a programming error.
func Register(k Kind) {
	providers.Lock()
	defer providers.Unlock()
	if _, dup := providers.byName[k.Name]; dup || k.Name == "" || k.New == nil || k.Settings == nil {
		panic(fmt.Sprintf("discovery: provider %q registered twice or incomplete", k.Name))
	}
	providers.byName[k.Name] = k
}

// lookup returns the factory registered under name.
func lookup(name string) (Factory, bool) {
	providers.RLock()
	defer providers.RUnlock()
	k, ok := providers.byName[name]
	return k.New, ok
}

// settingsTypes returns a new, empty settings value of every provider, by
// name.
func settingsTypes() map[string]any {
	providers.RLock()
	defer providers.RUnlock()
	out := make(map[string]any, len(providers.byName))
	for name, k := range providers.byName {
		out[name] = k.Settings()
	}
	return out
}

// Names returns the registered providers' names, sorted.
func Names() []string {
	providers.RLock()
	defer providers.RUnlock()
	out := make([]string, 0, len(providers.byName))
	for n := range providers.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
