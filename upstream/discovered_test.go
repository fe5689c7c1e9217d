package upstream

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/discovery"
	"github.com/tollgate/tollgate/internal/testutil"
	"go.uber.org/zap"
)

// membersOf returns members fed by the test (apply) instead of a watch.
func membersOf(set ...discovery.Instance) *Members {
	m := &Members{source: "test", service: "orders", log: zap.NewNop(), byKey: map[string]*Instance{}}
	m.cur.Store(&memberList{})
	m.apply(discovery.Set{Instances: set})
	return m
}

func discoveredSet(n, shift int) []discovery.Instance {
	out := make([]discovery.Instance, n)
	for i := range out {
		out[i] = discovery.Instance{Addr: fmt.Sprintf("10.0.%d.%d:80", shift, i), Weight: 1 + i%3,
			Meta: map[string]string{"version": []string{"v1", "v2"}[i%2]}}
	}
	return out
}

func discoveredService(t testing.TB, m *Members, balance string) *Service {
	t.Helper()
	cfg := ServiceConfig{Name: "orders", Balance: balance, Members: m}
	if balance == "hash" {
		cfg.Key = "header.X-User-Id"
	}
	s, err := NewService(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDiscoveredSetChangesKeepStayingInstances(t *testing.T) {
	m := membersOf(discoveredSet(3, 0)...)
	s := discoveredService(t, m, "")
	canary := s.Select(map[string]string{"version": "v2"})
	first := s.Instances()
	if len(first) != 3 || len(canary.Instances()) != 1 || canary.Instances()[0] != first[1] {
		t.Fatalf("set %d, canary %v", len(first), canary.Instances())
	}
	// One instance leaves, one comes: the two that stay are the same
	// objects; the one that left gets no pick.
	next := append(discoveredSet(3, 0)[:2:2], discovery.Instance{Addr: "10.0.9.9:80", Weight: 1})
	m.apply(discovery.Set{Instances: next})
	now := s.Instances()
	if len(now) != 3 || now[0] != first[0] || now[1] != first[1] || now[2] == first[2] {
		t.Fatalf("after the change: %v", now)
	}
	for range 100 {
		if s.current().balancer.Pick(nil, nil) == first[2] {
			t.Fatal("the instance that left was picked")
		}
	}
	// A weight or metadata change is a new instance: balancers and
	// selections read both.
	changed := append([]discovery.Instance(nil), next...)
	changed[0].Weight = 7
	m.apply(discovery.Set{Instances: changed})
	if s.Instances()[0] == first[0] || s.Instances()[1] != first[1] {
		t.Fatal("a weight change kept the instance, or changed another")
	}
	// An empty set leaves nothing to pick: the service answers 503.
	m.apply(discovery.Set{})
	if in := s.current().balancer.Pick(nil, nil); in != nil || len(canary.Instances()) != 0 {
		t.Fatalf("empty set picked %v", in)
	}
}

// TestSetChangesRebuildBalancersOffTheRequestPath: a change rebuilds the
// balancer of every live view at once (a request only loads it), and a
// view nothing uses any more is let go.
func TestSetChangesRebuildBalancersOffTheRequestPath(t *testing.T) {
	m := membersOf(discoveredSet(4, 0)...)
	s := discoveredService(t, m, "")
	canary := s.Select(map[string]string{"version": "v2"})
	before, canaryBefore := s.set.Load(), canary.set.Load()
	m.apply(discovery.Set{Instances: discoveredSet(6, 1)})
	if s.set.Load() == before || canary.set.Load() == canaryBefore || len(s.set.Load().instances) != 6 || len(canary.set.Load().instances) != 3 {
		t.Fatal("a change did not rebuild the views' balancers")
	}
	for range 3 {
		s.Select(map[string]string{"version": "v1"}) // dropped at once
	}
	runtime.GC()
	m.apply(discovery.Set{Instances: discoveredSet(5, 2)})
	m.mu.Lock()
	views := len(m.views)
	m.mu.Unlock()
	if views != 2 {
		t.Fatalf("%d views kept, want the 2 still used", views)
	}
	runtime.KeepAlive(s)
	runtime.KeepAlive(canary)
}

func TestDiscoveredPickAllocs(t *testing.T) {
	if testutil.Race {
		t.Skip("the race detector allocates; make test runs allocation gates without it")
	}
	for _, balance := range []string{"round_robin", "least_conn"} {
		s := discoveredService(t, membersOf(discoveredSet(10, 0)...), balance)
		if n := testing.AllocsPerRun(1000, func() {
			if s.current().balancer.Pick(nil, nil) == nil {
				t.Fatal("no pick")
			}
		}); n != 0 {
			t.Fatalf("%s: a discovered service's pick allocates %v times", balance, n)
		}
	}
}

// BenchmarkServicePick compares a pick from a service written in the file
// with one from a discovered service, still and while its registry
// changes the set ten times a second.
func BenchmarkServicePick(b *testing.B) {
	static, err := NewService(ServiceConfig{Name: "orders"}, instances(1, 2, 3, 1, 2, 3, 1, 2, 3, 1))
	if err != nil {
		b.Fatal(err)
	}
	pick := func(b *testing.B, s *Service) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if s.current().balancer.Pick(nil, nil) == nil {
					b.Fatal("no pick")
				}
			}
		})
	}
	b.Run("file", func(b *testing.B) { pick(b, static) })
	b.Run("discovered", func(b *testing.B) { pick(b, discoveredService(b, membersOf(discoveredSet(10, 0)...), "")) })
	b.Run("discovered-changing-10/s", func(b *testing.B) {
		m := membersOf(discoveredSet(10, 0)...)
		s := discoveredService(b, m, "")
		var stop atomic.Bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 1; !stop.Load(); i++ {
				time.Sleep(100 * time.Millisecond)
				m.apply(discovery.Set{Instances: discoveredSet(10, i%2)})
			}
		}()
		pick(b, s)
		stop.Store(true)
		<-done
	})
}
