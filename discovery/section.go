package discovery

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/pipeline"
	"go.uber.org/zap"
	"gopkg.in/yaml.v3"
)

// Settings is the top-level `discovery:` section: the settings every
// provider shares, and each configured provider's own under its name.
type Settings struct {
	// CacheDir is where each watched set is saved when it changes, so a
	// node started while its registry is down serves the set it knew.
	// Default: the user's cache directory (…/tollgate/discovery).
	CacheDir string `yaml:"cache_dir"`
	// EmptyGrace is how long a registry must keep answering an empty set
	// before a service that had instances loses them (default 30s; 0
	// empties at once). A registry wiped by mistake, or a deploy that
	// deregisters everything before registering again, does not take
	// the service down meanwhile.
	EmptyGrace *pipeline.Duration `yaml:"empty_grace"`
	// InitialWait is how long loading a configuration waits for a new
	// watch's first set when none is saved (default 3s): a node that
	// starts serves from its first request on, and one whose registry
	// does not answer starts anyway (the service answers 503 until it
	// does). Requests never wait on a registry.
	InitialWait *pipeline.Duration `yaml:"initial_wait"`
	// MaxInstances bounds one watched set (default 4096): a registry
	// listing more is read as failing, and the last set keeps serving.
	// Each instance holds a connection pool and counters; a registry's
	// contents are its writers' input.
	MaxInstances int `yaml:"max_instances"`
	// Providers are the registries, by provider name (etcd, dns, …).
	Providers map[string]yaml.Node `yaml:",inline"`
}

// compiled is what the section shares with the services that discover.
type compiled struct {
	providers   map[string]providerEntry
	cacheDir    string
	emptyGrace  time.Duration
	initialWait time.Duration
	maxSet      int
}

type providerEntry struct {
	provider Provider
	key      string // the provider's identity: name and settings digest
}

var sectionKey = pipeline.NewKey[*compiled]("discovery.providers")

func init() {
	pipeline.RegisterSection(pipeline.Section{
		Key:       "discovery",
		Config:    func() any { return &Settings{} },
		Entries:   settingsTypes,
		Provision: provision,
	})
}

const (
	defaultEmptyGrace   = 30 * time.Second
	defaultInitialWait  = 3 * time.Second
	defaultMaxInstances = 4096
)

func provision(env *pipeline.Env, cfg any) error {
	s := cfg.(*Settings)
	if s.EmptyGrace == nil {
		s.EmptyGrace = ptr(pipeline.Duration(defaultEmptyGrace))
	}
	if s.InitialWait == nil {
		s.InitialWait = ptr(pipeline.Duration(defaultInitialWait))
	}
	if s.MaxInstances == 0 {
		s.MaxInstances = defaultMaxInstances
	}
	if s.MaxInstances < 1 {
		return fmt.Errorf("discovery: max_instances must be positive")
	}
	if s.CacheDir == "" {
		s.CacheDir = defaultCacheDir()
	}
	c := &compiled{providers: map[string]providerEntry{}, cacheDir: s.CacheDir,
		emptyGrace: s.EmptyGrace.D(), initialWait: s.InitialWait.D(), maxSet: s.MaxInstances}
	for name, node := range s.Providers {
		entry, err := buildProvider(env, name, &node)
		if err != nil {
			return err
		}
		c.providers[name] = entry
	}
	sectionKey.Set(env, c)
	return nil
}

// Report hands on the figures of the providers that have some
// (pipeline.Reporter): the section's shared object is what the metrics
// writer finds in the snapshot.
func (c *compiled) Report(emit pipeline.Emit) {
	for _, name := range slices.Sorted(maps.Keys(c.providers)) {
		if r, ok := c.providers[name].provider.(pipeline.Reporter); ok {
			r.Report(emit)
		}
	}
}

// buildProvider builds the provider name from its settings node (nil:
// none written), or finds the one built for the same settings before.
func buildProvider(env *pipeline.Env, name string, node *yaml.Node) (providerEntry, error) {
	line := 0
	var generic any
	if node != nil {
		line = node.Line
		if err := node.Decode(&generic); err != nil {
			return providerEntry{}, fmt.Errorf("line %d: discovery.%s: %v", line, name, err)
		}
	}
	factory, ok := lookup(name)
	if !ok {
		return providerEntry{}, fmt.Errorf("line %d: discovery: unknown provider %q (known: %s)", line, name, strings.Join(Names(), ", "))
	}
	key := "discovery.provider|" + name + "|" + pipeline.Digest(generic)
	penv := Env{Logger: env.Logger.Named("discovery").With(zap.String("provider", name)), ForOtherHosts: env.ForOtherHosts}
	var buildErr error
	p := env.State.Get(key, func() (any, func()) {
		p, err := factory(Decoder(node), penv)
		if err != nil {
			buildErr = err
			return nil, nil
		}
		return p, closerOf(p)
	})
	if buildErr != nil || p == nil {
		return providerEntry{}, fmt.Errorf("line %d: discovery.%s: %v", line, name, buildErr)
	}
	return providerEntry{provider: p.(Provider), key: key}, nil
}

// Open returns the watch a service's discover setting asks for, started
// the first time a configuration asks for it. A new watch with no saved
// set gets initial_wait to find its first one; requests never wait.
func Open(env *pipeline.Env, spec *Spec) (*Watch, error) {
	if err := spec.check(); err != nil {
		return nil, err
	}
	c, ok := sectionKey.Get(env)
	if !ok {
		return nil, fmt.Errorf("discover: the discovery section was not provisioned")
	}
	entry, ok := c.providers[spec.From]
	if !ok {
		// A provider every setting of which has a default (dns reads
		// the host's resolvers) needs no section of its own.
		var err error
		if entry, err = buildProvider(env, spec.From, nil); err != nil {
			return nil, fmt.Errorf("discover: from %q: %v", spec.From, strings.TrimPrefix(err.Error(), "line 0: "))
		}
		c.providers[spec.From] = entry
	}
	target, err := entry.provider.Target(spec.Name, spec.decoder())
	if err != nil {
		return nil, fmt.Errorf("discover: %v", err)
	}
	grace := c.emptyGrace
	if spec.EmptyGrace != nil {
		grace = spec.EmptyGrace.D()
	}
	id := pipeline.Digest(struct {
		Provider string
		Settings map[string]any
	}{entry.key, spec.Settings})
	if env.Offline {
		// A check: the settings are valid; nothing is watched.
		return stillWatch(target), nil
	}
	key := fmt.Sprintf("discovery.watch|%s|%s|%s|%d", id, grace, c.cacheDir, c.maxSet)
	created := false
	w := env.State.Get(key, func() (any, func()) {
		created = true
		w := startWatch(target, grace, c.maxSet, savedPath(c.cacheDir, target.String()+"|"+id), env.Logger.Named("discovery"))
		return w, w.close
	}).(*Watch)
	if created && w.Current() == nil {
		w.waitFirst(c.initialWait)
	}
	return w, nil
}

// closerOf returns p's Close, when it has one.
func closerOf(p Provider) func() {
	if c, ok := p.(interface{ Close() error }); ok {
		return func() { _ = c.Close() }
	}
	return nil
}

// defaultCacheDir is the user's cache directory's tollgate/discovery, or
// the temporary directory's when the user has none.
func defaultCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "tollgate", "discovery")
}

func ptr[T any](v T) *T { return &v }
