package pipeline

import "github.com/tollgate/tollgate/trace"

// StartSpan begins a child span of the request's server span for a step
// that can take time (a Redis claim, a call, a wait) and returns the
// handle EndSpan takes. An untraced request records nothing and reads no
// clock.
func (c *Ctx) StartSpan(kind trace.SpanKind) int {
	if c.Trace.Rec == nil {
		return trace.NoSpan
	}
	return c.Trace.StartSpan(kind, c.Now())
}

// EndSpan ends the child span h (StartSpan).
func (c *Ctx) EndSpan(h int) {
	if h == trace.NoSpan {
		return
	}
	c.Trace.EndSpan(h, c.Now())
}

// traceAnswer records the gateway's own answer (a refusal, a failure it
// answers for) as an event of the request's span.
func (c *Ctx) traceAnswer(status int, message string) {
	if c.Trace.Rec == nil {
		return
	}
	c.Trace.AddEvent(EventGatewayAnswer, c.Now(), status, message)
}

// EventGatewayAnswer names the span event of an answer the gateway made
// itself instead of the backend's: a refusal (limit, WAF, signature,
// breaker) or an upstream failure it answers for.
const EventGatewayAnswer = "gateway answer"
