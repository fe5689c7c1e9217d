package config

import (
	"fmt"
	"github.com/tollgate/tollgate/discovery"
	"sort"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/upstream"
)

// compileServices builds the snapshot's services, their instances coming
// from the reload-surviving state, in the order of their names.
func (c *Compiler) compileServices(s *Snapshot, f *File, source string) error {
	names := make([]string, 0, len(f.Services))
	for name := range f.Services {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		sc := f.Services[name]
		pool := upstream.Pool{
			Connect:          sc.Timeouts.Connect.D(),
			Read:             sc.Timeouts.Read.D(),
			IdleConn:         sc.IdleConn.D(),
			MaxConns:         sc.MaxConns,
			MaxResponseBytes: sc.MaxResponseBytes,
			AnswerWindow:     sc.AnswerWindow,
			StreamResponse:   sc.StreamResponse,
		}
		var health upstream.Health
		if sc.Health != nil {
			health = *sc.Health
		}
		var members *upstream.Members
		instances := make([]*upstream.Instance, 0, len(sc.Instances))
		for _, in := range sc.Instances {
			instances = append(instances, upstream.SharedInstance(s.state, in.Addr, in.Weight, pool, health, c.logger()))
		}
		if sc.Discover != nil {
			w, err := discovery.Open(s.env, sc.Discover)
			if err != nil {
				return &Error{File: source, Line: sc.Discover.Line, Msg: fmt.Sprintf("service %q: %v", name, err)}
			}
			members = upstream.SharedMembers(s.state, w, name, pool, health, c.logger())
		}
		svcCfg := upstream.ServiceConfig{
			Name: name, Balance: sc.Balance, Key: sc.Key, Total: sc.Timeouts.Total.D(), Connect: sc.Timeouts.Connect.D(),
			Retry: *sc.Retry, RetryPutDelete: sc.RetryPutDelete, Protocol: sc.Protocol, Members: members,
		}
		if sc.TLS != nil && sc.TLS.On() {
			tc, err := sc.TLS.Config()
			if err != nil {
				return &Error{File: source, Line: sc.Line, Msg: fmt.Sprintf("service %q: tls: %v", name, err)}
			}
			svcCfg.GRPCTLS = &upstream.GRPCTLS{Config: tc, Key: pipeline.Digest(sc.TLS)}
		}
		if b := sc.Breaker; b != nil {
			if err := svcCfg.SetBreaker(s.state, b, c.Clock.Now); err != nil {
				return &Error{File: source, Line: sc.Line, Msg: fmt.Sprintf("service %q: %v", name, err)}
			}
		}
		svc, err := upstream.NewService(svcCfg, instances)
		if err != nil {
			return &Error{File: source, Line: sc.Line, Msg: err.Error()}
		}
		s.Services[name] = svc
	}
	return nil
}
