package upstream

import (
	"maps"
	"net"
	"slices"
	"strconv"

	"github.com/tollgate/tollgate/adaptive"
	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/discovery"
	"github.com/tollgate/tollgate/pipeline"
)

// provisionServices checks the services, writes their defaults in and
// builds them, their instances coming from the reload-surviving state, in
// the order of their names; it shares them by name (ServicesKey) and as
// the routes' way to them (pipeline.UpstreamsKey).
func provisionServices(env *pipeline.Env, cfg any) error {
	settings := *cfg.(*map[string]*ServiceSettings)
	defaults, ok := defaultsKey.Get(env)
	if !ok {
		_ = provisionDefaults(env, &defaults)
	}
	names := slices.Sorted(maps.Keys(settings))
	for _, name := range names {
		sc := settings[name]
		if sc == nil {
			return pipeline.ErrorAt(0, "service %q is empty", name)
		}
		sc.inherit(defaults)
		if err := sc.validate(name); err != nil {
			return err
		}
	}
	services := make(map[string]*Service, len(settings))
	for _, name := range names {
		svc, err := settings[name].build(env, name)
		if err != nil {
			return err
		}
		services[name] = svc
	}
	edge, _ := pipeline.EdgeKey.Get(env)
	if edge == nil {
		edge = &Edge{}
	}
	ServicesKey.Set(env, services)
	pipeline.UpstreamsKey.Set(env, upstreams{services: services, edge: edge})
	return nil
}

// validate checks what does not need building, each error at the
// service's place.
func (s *ServiceSettings) validate(name string) error {
	switch {
	case len(s.Instances) == 0 && s.Discover == nil:
		return pipeline.ErrorAt(s.Line, "service %q has no instances (write them, or discover them: discover: {from: etcd, name: %s})", name, name)
	case len(s.Instances) > 0 && s.Discover != nil:
		return pipeline.ErrorAt(s.Discover.Line, "service %q: instances and discover exclude each other", name)
	}
	for _, in := range s.Instances {
		host, port, err := net.SplitHostPort(in.Addr)
		if err != nil || host == "" {
			return pipeline.ErrorAt(s.Line, "service %q: instance addr %q must be host:port", name, in.Addr)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return pipeline.ErrorAt(s.Line, "service %q: instance addr %q has an invalid port", name, in.Addr)
		}
		if in.Weight < 1 || in.Weight > 10000 {
			return pipeline.ErrorAt(s.Line, "service %q: instance %s weight %d must be 1..10000", name, in.Addr, in.Weight)
		}
	}
	t := s.Timeouts
	if t.Connect.D() >= t.Total.D() || t.Read.D() > t.Total.D() {
		return pipeline.ErrorAt(s.Line, "service %q: connect (%s) and read (%s) timeouts must fit within total (%s)",
			name, t.Connect.D(), t.Read.D(), t.Total.D())
	}
	return nil
}

// build makes the service: its instances (or the members a registry
// gives), its breaker and its gRPC TLS.
func (s *ServiceSettings) build(env *pipeline.Env, name string) (*Service, error) {
	pool := Pool{
		Connect:          s.Timeouts.Connect.D(),
		Read:             s.Timeouts.Read.D(),
		IdleConn:         s.IdleConn.D(),
		MaxConns:         s.MaxConns,
		MaxResponseBytes: s.MaxResponseBytes,
		AnswerWindow:     s.AnswerWindow,
		StreamResponse:   s.StreamResponse,
	}
	var health Health
	if s.Health != nil {
		health = *s.Health
	}
	var members *Members
	instances := make([]*Instance, 0, len(s.Instances))
	for _, in := range s.Instances {
		instances = append(instances, SharedInstance(env.State, in.Addr, in.Weight, pool, health, env.Logger))
	}
	if s.Discover != nil {
		w, err := discovery.Open(env, s.Discover)
		if err != nil {
			return nil, pipeline.ErrorAt(s.Discover.Line, "service %q: %v", name, err)
		}
		members = SharedMembers(env.State, w, name, pool, health, env.Logger)
	}
	cfg := ServiceConfig{
		Name: name, Balance: s.Balance, Key: s.Key, Total: s.Timeouts.Total.D(), Connect: s.Timeouts.Connect.D(),
		Retry: *s.Retry, RetryPutDelete: s.RetryPutDelete, Protocol: s.Protocol, Members: members,
	}
	if s.TLS != nil && s.TLS.On() {
		tc, err := s.TLS.Config()
		if err != nil {
			return nil, pipeline.ErrorAt(s.Line, "service %q: tls: %v", name, err)
		}
		cfg.GRPCTLS = &GRPCTLS{Config: tc, Key: pipeline.Digest(s.TLS)}
	}
	if b := s.Breaker; b != nil {
		if err := cfg.SetBreaker(env.State, b, env.Now); err != nil {
			return nil, pipeline.ErrorAt(s.Line, "service %q: %v", name, err)
		}
	}
	if cc := s.Concurrency; cc != nil {
		gate, err := adaptive.ForService(env, name, cc)
		if err != nil {
			return nil, pipeline.ErrorAt(s.Line, "service %q: %v", name, err)
		}
		cfg.Gate = gate
	}
	svc, err := NewService(cfg, instances)
	if err != nil {
		return nil, pipeline.ErrorAt(s.Line, "%s", err.Error())
	}
	return svc, nil
}

// upstreams is the routes' way to the services (pipeline.Upstreams).
type upstreams struct {
	services map[string]*Service
	edge     *Edge
}

func (u upstreams) Has(service string) bool { return u.services[service] != nil }

func (u upstreams) Action(service string, metadata map[string]string) pipeline.Action {
	svc := u.services[service]
	switch {
	case svc == nil:
		return nil
	case len(metadata) > 0:
		return svc.Select(metadata)
	}
	return svc
}

func (u upstreams) Protocol(service string) string {
	switch svc := u.services[service]; {
	case svc == nil:
		return ""
	case svc.GRPC():
		return "grpc"
	case svc.Dubbo():
		return "dubbo"
	}
	return "http"
}

func (u upstreams) Forwarding(policy *codec.HeaderPolicy) pipeline.Filter {
	return &Forwarding{Edge: u.edge, Policy: policy}
}

// ServicesOf returns the services a snapshot's environment holds, by name
// (nil for none).
func ServicesOf(env *pipeline.Env) map[string]*Service {
	services, _ := ServicesKey.Get(env)
	return services
}
