package limiter

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/pipeline"
)

func benchLocal(b *testing.B, limits string, r req, parallel bool) {
	e := newEnv()
	f := e.build(b, "bench", limits)
	b.ReportAllocs()
	if !parallel {
		c := r.ctx(b)
		b.ResetTimer()
		for range b.N {
			f.Handle(c)
		}
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		c := r.ctx(b)
		for pb.Next() {
			f.Handle(c)
		}
	})
}

func BenchmarkLocalIP(b *testing.B) {
	benchLocal(b, "[{by: ip, rate: 1e9}]", req{}, false)
}

func BenchmarkLocalIPParallel(b *testing.B) {
	benchLocal(b, "[{by: ip, rate: 1e9}]", req{}, true)
}

func BenchmarkLocalRefused(b *testing.B) {
	benchLocal(b, "[{by: ip, rate: 1, burst: 1}]", req{}, false)
}

// Three rules admitting: a tier quota, its API share, and a per-IP limit.
func BenchmarkLocalTierShareIP(b *testing.B) {
	benchLocal(b, "[{by: consumer}, {by: consumer, share: 0.5}, {by: ip, rate: 1e9}]", req{consumer: "huge"}, false)
}

// Three rules, the last refusing: the first two give their admission back.
func BenchmarkLocalRefusedByThirdRule(b *testing.B) {
	benchLocal(b, "[{by: consumer}, {by: consumer, share: 0.5}, {by: ip, rate: 1, burst: 1}]", req{consumer: "huge"}, false)
}

func BenchmarkLocalJSONField(b *testing.B) {
	json := "POST / HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: 24\r\n\r\n{\"merchant_id\":\"m-1234\"}"
	benchLocal(b, "[{by: json.merchant_id, rate: 1e9, algorithm: sliding_window}]", req{raw: json}, false)
}

func BenchmarkLeaseFastPathParallel(b *testing.B) {
	s := newSim(b, 1, "[{by: route, rate: 1e9, per: 1s, burst: 1e9, scope: cluster}]")
	nd := warmLease(b, s, 1e6)
	go func() {
		for range 1 << 30 {
			if nd.f.rules[0].lease.stats().Held < 1e6 {
				s.clock.Set(s.clock.ns.Load() + int64(time.Millisecond))
				nd.mgr.step()
			}
			select {
			case <-b.Context().Done():
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c := req{}.ctx(b)
		for pb.Next() {
			if nd.f.Handle(c) != pipeline.Continue {
				b.Error("refused")
				return
			}
		}
	})
}
