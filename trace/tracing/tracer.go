// Package tracing turns the gateway's requests into exported traces: the
// `tracing:` section (section.go) says where spans go (OTLP, package
// trace/otlp), which requests are kept (sampling) and which propagation
// formats are read and written. The gateway calls a Tracer at the start
// and the end of every request; the steps between record their child
// spans through the request's trace.Context.
package tracing

import (
	"fmt"
	"time"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/trace"
	"github.com/tollgate/tollgate/trace/otlp"
)

// Sink takes the finished recordings to export. Offer never waits: it
// queues r or drops it (counted), and either way r is the sink's, which
// releases it (trace.Recording.Release) when done.
type Sink interface {
	Offer(r *trace.Recording)
}

var tracerKey = pipeline.NewKey[*Tracer]("tracing.tracer")

// Of returns the tracer a snapshot's build shared (env), nil when it has
// none.
func Of(env *pipeline.Env) *Tracer {
	t, _ := tracerKey.Get(env)
	return t
}

// Tracer is a snapshot's tracing: immutable, shared by its requests. A nil
// Tracer (no tracing section) reads and writes the W3C context only and
// records nothing.
type Tracer struct {
	sink    Sink
	exp     *otlp.Exporter
	node    string
	sampler sampler
	read    []trace.Formats
	write   trace.Formats
}

// configure takes the sampling and propagation settings.
func (t *Tracer) configure(s *Settings) error {
	t.sampler = newSampler(s)
	var err error
	if t.read, err = trace.ParseFormats(s.Propagation.Read, true); err != nil {
		return fmt.Errorf("tracing.propagation.read: %v", err)
	}
	if t.read == nil {
		t.read = []trace.Formats{} // read: [] reads none (nil would read W3C)
	}
	write, err := trace.ParseFormats(s.Propagation.Write, false)
	if err != nil {
		return fmt.Errorf("tracing.propagation.write: %v", err)
	}
	if t.write = trace.Union(write); t.write == 0 {
		return fmt.Errorf("tracing.propagation.write: name at least one format")
	}
	return nil
}

// Begin reads the request's trace context (or starts a trace) once its
// header section is checked, and starts recording its spans when they
// are exported.
func (t *Tracer) Begin(c *pipeline.Ctx) {
	if t == nil {
		trace.Begin(&c.Trace, &c.Received, &c.Req.Header)
		return
	}
	trace.BeginWith(&c.Trace, &c.Received, &c.Req.Header, t.read, t.write)
	if t.sink == nil {
		return
	}
	sampled := t.sampler.head(&c.Trace)
	// The backend continues the trace with the gateway's decision.
	if sampled {
		c.Trace.Flags |= trace.FlagSampled
	} else {
		c.Trace.Flags &^= trace.FlagSampled
	}
	if !sampled && !t.sampler.tail() {
		return // nothing could keep it: nothing recorded
	}
	r := trace.NewRecording()
	r.Sampled = sampled
	c.Trace.Rec = r
}

// Routed notes the route the request matched: its path as written in the
// configuration is the span's path template.
func Routed(c *pipeline.Ctx, pathTemplate string) {
	if r := c.Trace.Rec; r != nil {
		r.PathTemplate = pathTemplate
	}
}

// End closes the request's server span at end with what the request did,
// and hands the recording to the sink when it is to be exported.
func (t *Tracer) End(c *pipeline.Ctx, end time.Time) {
	r := c.Trace.Rec
	if r == nil {
		return
	}
	c.Trace.Rec = nil
	if t == nil || t.sink == nil {
		// Begun on a snapshot that traced; a reload since took tracing off.
		r.Release()
		return
	}
	fill(r, c, end, t.node)
	if !t.sampler.keep(r, c) {
		r.Release()
		return
	}
	t.sink.Offer(r)
}

// fill writes the server span's identity and attributes from the request.
func fill(r *trace.Recording, c *pipeline.Ctx, end time.Time, node string) {
	tc := &c.Trace
	r.TraceID, r.SpanID, r.ParentID = tc.TraceID, tc.SpanID, tc.ParentID
	r.Start, r.End = c.Start.UnixNano(), end.UnixNano()
	r.Route, r.Consumer, r.Decision = c.RouteName, c.Consumer, c.Decision
	r.Service, r.Attempts = c.Outcome.Service, c.Outcome.Attempts
	if c.Outcome.Result != pipeline.ResultNone {
		r.Result = c.Outcome.Result.String()
	}
	r.Status = c.Resp.StatusCode()
	r.Client = c.ClientIP
	r.Node = node
	r.SetMethod(c.Req.Header.Method())
	r.SetRequestID(tc.RequestID)
}

// Exporter returns the exporter spans go to, nil when none.
func (t *Tracer) Exporter() *otlp.Exporter { return t.exp }
