package upstream

import (
	"maps"
)

// instanceSet is what a service's requests are balanced over: the
// instances (of the file, or the members' list of the moment, selected by
// metadata) and the balancer built for them.
type instanceSet struct {
	instances []*Instance
	balancer  Balancer
}

// current returns the set a request is balanced over: one atomic load.
// A discovered service's is rebuilt by its members, in the background,
// when the registry's set changes (Members.apply); a request never builds
// a balancer.
func (s *Service) current() *instanceSet { return s.set.Load() }

// balanced builds the service's balancer over the instances matching its
// selection.
func (s *Service) balanced(all []*Instance) *instanceSet {
	instances := all
	if len(s.match) > 0 {
		instances = make([]*Instance, 0, len(all))
		for _, in := range all {
			if matches(in.Meta, s.match) {
				instances = append(instances, in)
			}
		}
	}
	set := &instanceSet{instances: instances}
	switch s.balance {
	case "least_conn":
		set.balancer = NewLeastConn(instances)
	case "hash":
		set.balancer = NewHash(instances, s.hashKey)
	default:
		set.balancer = NewRoundRobin(instances)
	}
	return set
}

// matches reports whether meta has every key of want with its value.
func matches(meta, want map[string]string) bool {
	for k, v := range want {
		if got, ok := meta[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Instances returns the instances the service sends requests to now.
func (s *Service) Instances() []*Instance { return s.current().instances }

// Members returns the service's discovered members; nil for a service
// whose instances are written in the file.
func (s *Service) Members() *Members { return s.members }

// Select returns a view of the service limited to the instances whose
// metadata has every key of match with its value (a split's `metadata:`):
// a canary follows the instances a deploy registers with `version: v2`.
// The view shares the service's settings, breaker, concurrency gate and
// instances; it has a balancer of its own.
func (s *Service) Select(match map[string]string) *Service {
	v := &Service{Name: s.Name, members: s.members, match: maps.Clone(match), balance: s.balance, hashKey: s.hashKey,
		Total: s.Total, Retry: s.Retry, RetryPutDelete: s.RetryPutDelete, Connect: s.Connect,
		breaker: s.breaker, classifier: s.classifier, gate: s.gate, grpc: s.grpc, grpcTLS: s.grpcTLS}
	if s.members == nil {
		v.set.Store(v.balanced(s.set.Load().instances))
	} else {
		s.members.attach(v)
	}
	return v
}
