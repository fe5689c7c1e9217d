package upstream

import (
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/trace"
)

// startAttempt begins the span of one try upstream: each retry is a span
// of its own, naming the instance it went to.
// The context forwarded to the backend names the try as its parent.
func (s *Service) startAttempt(c *pipeline.Ctx) int {
	kind := trace.SpanUpstream
	if s.grpc {
		kind = trace.SpanGRPCCall
	}
	h := c.StartSpan(kind)
	if c.Trace.Rec != nil {
		var id *[8]byte
		if sp := c.Trace.Span(h); sp != nil {
			id = &sp.ID
		}
		c.Trace.ForwardAttempt(&c.Fields, id)
	}
	return h
}

// endAttempt ends the try's span with how it went: the answer's status,
// or the failure the gateway answered for.
func (s *Service) endAttempt(c *pipeline.Ctx, h int, in *Instance, result pipeline.Result, status int) {
	sp := c.Trace.Span(h)
	if sp == nil {
		return
	}
	sp.Instance, sp.Service = in.Addr, s.Name
	sp.Result, sp.Status = result.String(), status
	sp.Error = result != pipeline.ResultOK || status >= 500
	c.EndSpan(h)
}
