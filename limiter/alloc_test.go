//go:build !race

package limiter

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/pipeline"
)

// TestDecisionsDoNotAllocate gates the hot path: admitting and refusing on
// a local rule (by ip, by a JSON field, a tier quota with its share) and on
// a cluster rule's leased tokens allocate nothing once the key has a
// counter.
func TestDecisionsDoNotAllocate(t *testing.T) {
	e := newEnv()
	json := "POST / HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: 24\r\n\r\n{\"merchant_id\":\"m-1234\"}"
	for name, tc := range map[string]struct {
		limits string
		r      req
		admit  bool
	}{
		"ip admitted":        {"[{by: ip, rate: 1e9, headers: true}]", req{}, true},
		"ip refused":         {"[{by: ip, rate: 1, burst: 1}]", req{}, false},
		"json admitted":      {"[{by: json.merchant_id, rate: 1e9}]", req{raw: json}, true},
		"tier+share":         {"[{by: consumer}, {by: consumer, share: 0.5}]", req{consumer: "big"}, true},
		"tier refused":       {"[{by: consumer, share: 0.001}]", req{consumer: "demo-app"}, false},
		"sliding admitted":   {"[{by: user, rate: 1e9, algorithm: sliding_window}]", req{user: "u"}, true},
		"challenge refused":  {"[{by: ip, rate: 1, burst: 1, on_reject: {status: 429, body: x}}]", req{}, false},
		"reject_for blocked": {"[{by: ip, rate: 1, burst: 1, reject_for: 1h}]", req{}, false},
	} {
		t.Run(name, func(t *testing.T) {
			f := e.build(t, name, tc.limits)
			c := tc.r.ctx(t)
			defer pipeline.Release(c)
			// As fasthttp.Server does for its connections: the answer's
			// body buffer stays with the response. (Otherwise a refusal's
			// body buffer goes back to fasthttp's shared pool on every
			// Reset, and whether the pool keeps it depends on the body
			// sizes other tests in the process wrote.)
			c.Resp.KeepBodyBuffer = true
			run := func() {
				if tc.admit {
					e.clock.Add(10 * time.Millisecond)
				}
				v := f.Handle(c)
				if (v == pipeline.Continue) != tc.admit {
					t.Fatalf("verdict %v", v)
				}
				f.HandleResponse(c)
			}
			f.Handle(c) // the key's first request makes its counter (and is admitted)
			if n := testing.AllocsPerRun(1000, run); n != 0 {
				t.Fatalf("%.1f allocations per decision", n)
			}
		})
	}
	s := newSim(t, 1, "[{by: consumer, rate: 1e9, burst: 1e9, scope: cluster}]")
	nd := s.nodes[0]
	nd.f.Handle(nd.ctx)
	nd.mgr.step()
	if n := testing.AllocsPerRun(1000, func() { nd.f.Handle(nd.ctx) }); n != 0 {
		t.Fatalf("cluster fast path: %.1f allocations per decision", n)
	}
}
