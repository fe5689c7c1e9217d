package breaker

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

type noUpstream struct{ calls atomic.Int64 }

func (n *noUpstream) Serve(c *pipeline.Ctx) { n.calls.Add(1) }

func openChain(tb testing.TB) (*pipeline.Chain, *noUpstream) {
	st := pipeline.NewState(time.Minute).Begin()
	b := &pipeline.Build{Env: &pipeline.Env{Now: time.Now, State: st},
		Route: pipeline.RouteInfo{Name: "items", Forwards: true}}
	d, err := newDegrade(b, &DegradeSettings{Status: 200, Body: `{"items":[]}`})
	if err != nil {
		tb.Fatal(err)
	}
	br := New(Config{}, nil)
	br.ForceOpen()
	up := &noUpstream{}
	return pipeline.NewChain(up, d, &RouteBreaker{Name: "items", b: br, cls: NewClassifier(nil)}), up
}

// TestOpenBreakerAnswersDegraded: while open, the route answers its
// degraded answer and the action (the upstream) never runs.
func TestOpenBreakerAnswersDegraded(t *testing.T) {
	ch, up := openChain(t)
	var req fasthttp.Request
	var resp fasthttp.Response
	req.SetRequestURI("/items")
	c := pipeline.AcquireParsed(&req, &resp)
	defer pipeline.Release(c)
	ch.Run(c)
	if resp.StatusCode() != 200 || string(resp.Body()) != `{"items":[]}` || up.calls.Load() != 0 {
		t.Fatalf("status %d body %s upstream calls %d", resp.StatusCode(), resp.Body(), up.calls.Load())
	}
}

// BenchmarkOpenBreakerDegraded is the cost of a degraded answer while the
// breaker is open: the whole route chain, no upstream.
func BenchmarkOpenBreakerDegraded(b *testing.B) {
	ch, _ := openChain(b)
	var req fasthttp.Request
	var resp fasthttp.Response
	req.SetRequestURI("/items")
	b.ReportAllocs()
	for b.Loop() {
		c := pipeline.AcquireParsed(&req, &resp)
		ch.Run(c)
		pipeline.Release(c)
	}
}
