//go:build !race

package tracing

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/trace"
)

// releasing is a sink that exports nothing: what the request path costs
// up to the hand-over.
type releasing struct{ n int }

func (s *releasing) Offer(r *trace.Recording) { s.n++; r.Release() }

// oneRequest is what a traced request does to its recording: begin, a
// route, an upstream attempt, a refusal's event, end.
func oneRequest(tr *Tracer, c *pipeline.Ctx) {
	c.Start = time.Now()
	tr.Begin(c)
	Routed(c, "/orders/")
	c.RouteName, c.Consumer = "orders", "app-1"
	h := c.StartSpan(trace.SpanUpstream)
	if sp := c.Trace.Span(h); sp != nil {
		sp.Instance, sp.Status = "10.0.0.1:80", 200
	}
	c.EndSpan(h)
	c.Trace.AddEvent(pipeline.EventGatewayAnswer, c.Start, 429, "rate limited")
	c.Resp.SetStatusCode(200)
	tr.End(c, time.Now())
}

func TestRecordingAllocs(t *testing.T) {
	sink := &releasing{}
	tr := &Tracer{sink: sink, node: "n1"}
	c := recordedCtx(t)
	oneRequest(tr, c)
	if n := testing.AllocsPerRun(1000, func() { oneRequest(tr, c) }); n != 0 {
		t.Fatalf("recording a request's spans allocates %.1f times, want 0", n)
	}
	if sink.n == 0 {
		t.Fatal("nothing reached the sink")
	}
}

func BenchmarkRecordedRequest(b *testing.B) {
	tr := &Tracer{sink: &releasing{}, node: "n1"}
	c := recordedCtx(b)
	b.ReportAllocs()
	for b.Loop() {
		oneRequest(tr, c)
	}
}

func BenchmarkUntracedRequest(b *testing.B) {
	var tr *Tracer
	c := recordedCtx(b)
	b.ReportAllocs()
	for b.Loop() {
		oneRequest(tr, c)
	}
}
