package upstream

import (
	"time"

	"github.com/tollgate/tollgate/adaptive"
	"github.com/tollgate/tollgate/discovery"
	"github.com/tollgate/tollgate/internal/clienttls"
	"github.com/tollgate/tollgate/pipeline"
	"gopkg.in/yaml.v3"
)

// Defaults is the top-level `upstream` section: the settings every
// service inherits unless it sets its own.
type Defaults struct {
	Timeouts Timeouts          `yaml:"timeouts"`
	IdleConn pipeline.Duration `yaml:"idle_conn"` // the longest an idle connection is kept; default: up to 60s, below the backend's own timeout
	MaxConns int               `yaml:"max_conns"` // per instance; default 1024
	// MaxResponseBytes bounds an answer's body; default 64 MiB.
	MaxResponseBytes int `yaml:"max_response_bytes"`
	// AnswerWindow is the most of an answer's body held in memory; a
	// longer body streams from the backend as the client takes it;
	// default 256 KiB.
	AnswerWindow int `yaml:"answer_window"`
}

// Timeouts bound an upstream exchange.
type Timeouts struct {
	Connect pipeline.Duration `yaml:"connect"` // default 1s
	Read    pipeline.Duration `yaml:"read"`    // default 3s
	Total   pipeline.Duration `yaml:"total"`   // default 5s, retry included
}

// ServiceSettings is one entry of the top-level `services` section: a
// group of backend instances.
type ServiceSettings struct {
	// Instances are written here, or found in a registry (Discover).
	Instances        []InstanceEntry   `yaml:"instances"`
	Discover         *discovery.Spec   `yaml:"discover"`
	Balance          string            `yaml:"balance"` // round_robin (default) | least_conn | hash
	Key              string            `yaml:"key"`     // hash: the request value to hash, e.g. header.X-User-Id
	Timeouts         Timeouts          `yaml:"timeouts"`
	Retry            *int              `yaml:"retry"` // extra tries for idempotent requests; default 1
	RetryPutDelete   bool              `yaml:"retry_put_delete"`
	IdleConn         pipeline.Duration `yaml:"idle_conn"`
	MaxConns         int               `yaml:"max_conns"`
	MaxResponseBytes int               `yaml:"max_response_bytes"`
	AnswerWindow     int               `yaml:"answer_window"`
	StreamResponse   bool              `yaml:"stream_response"`
	// Breaker fails fast while the service fails (see package breaker);
	// Health ejects failing instances and probes them back.
	Breaker *BreakerSettings `yaml:"breaker"`
	Health  *Health          `yaml:"health"`
	// Concurrency bounds the requests in flight to the service on this
	// node, adaptively or to a fixed number (package adaptive).
	Concurrency *adaptive.Settings `yaml:"concurrency"`
	// Protocol is what the instances speak: http (default) or grpc
	// (HTTP/2, cleartext unless tls is set); a grpc service is reached
	// through routes with a grpc step.
	Protocol string `yaml:"protocol"`
	// TLS reaches a grpc service's instances over TLS.
	TLS *clienttls.Settings `yaml:"tls"`

	// Line is where the service was written, for errors.
	Line int `yaml:"-"`
}

// InstanceEntry is one backend address a service names.
type InstanceEntry struct {
	Addr   string `yaml:"addr"`
	Weight int    `yaml:"weight"` // default 1
}

// UnmarshalYAML records where the service was written.
func (s *ServiceSettings) UnmarshalYAML(n *yaml.Node) error {
	type plain ServiceSettings
	if err := n.Decode((*plain)(s)); err != nil {
		return err
	}
	s.Line = n.Line
	return nil
}

// defaultsKey carries the upstream section to the services section.
var defaultsKey = pipeline.NewKey[Defaults]("upstream.defaults")

func init() {
	pipeline.RegisterSection(pipeline.Section{
		Key:       "upstream",
		Config:    func() any { return new(Defaults) },
		Provision: provisionDefaults,
	})
	pipeline.RegisterSection(pipeline.Section{
		Key: "services",
		// A discovered service finds its registry in the discovery
		// section; every service inherits the upstream section.
		After:     []string{"upstream", "discovery"},
		Config:    func() any { return new(map[string]*ServiceSettings) },
		Provision: provisionServices,
	})
}

func provisionDefaults(env *pipeline.Env, cfg any) error {
	u := cfg.(*Defaults)
	setDur(&u.Timeouts.Connect, time.Second)
	setDur(&u.Timeouts.Read, 3*time.Second)
	setDur(&u.Timeouts.Total, 5*time.Second)
	// idle_conn unset (0) lets the pools choose (Pool.IdleConn).
	setInt(&u.MaxConns, 1024)
	setInt(&u.MaxResponseBytes, 64<<20)
	defaultsKey.Set(env, *u)
	return nil
}

// inherit writes the upstream section's settings into what s leaves
// unset.
func (s *ServiceSettings) inherit(u Defaults) {
	setDur(&s.Timeouts.Connect, u.Timeouts.Connect.D())
	setDur(&s.Timeouts.Read, u.Timeouts.Read.D())
	setDur(&s.Timeouts.Total, u.Timeouts.Total.D())
	setDur(&s.IdleConn, u.IdleConn.D())
	setInt(&s.MaxConns, u.MaxConns)
	setInt(&s.MaxResponseBytes, u.MaxResponseBytes)
	setInt(&s.AnswerWindow, u.AnswerWindow)
	if s.Retry == nil {
		one := 1
		s.Retry = &one
	}
	for i := range s.Instances {
		setInt(&s.Instances[i].Weight, 1)
	}
}

func setInt(p *int, v int) {
	if *p == 0 {
		*p = v
	}
}

func setDur(p *pipeline.Duration, v time.Duration) {
	if *p == 0 {
		*p = pipeline.Duration(v)
	}
}
