package tracing

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/trace"
)

// sampler decides which requests' spans are exported: by the head (the
// caller's sampled flag, else a share of new traces, decided from the
// trace id so that every hop that uses the same rule agrees), and by the
// tail, once the request is over (errors, refusals, slow requests are
// kept whatever the head said).
//
// The tail's cost: a decision at the end needs the spans of every
// request recorded, not only the sampled ones. With a tail rule on, each
// request fills a pooled Recording (no allocation; see
// BenchmarkRecordedRequest) and the unsampled ones are dropped at the
// end; with no tail rule, an unsampled request records nothing.
type sampler struct {
	// bound is the share as a threshold on the trace id's low 63 bits.
	bound    uint64
	slow     time.Duration
	errors   bool
	refusals bool
}

func newSampler(s *Settings) sampler {
	ratio := *s.Sample
	var bound uint64
	switch {
	case ratio >= 1:
		bound = math.MaxUint64
	case ratio > 0:
		bound = uint64(ratio * (1 << 63))
	}
	return sampler{bound: bound, slow: s.Slow.D(), errors: *s.Errors, refusals: s.Refusals}
}

// head is the decision when the request begins: the caller's, when it
// made one, else the share.
func (s *sampler) head(t *trace.Context) bool {
	if t.Decided {
		return t.Flags&trace.FlagSampled != 0
	}
	if s.bound == math.MaxUint64 {
		return true
	}
	return binary.BigEndian.Uint64(t.TraceID[8:])>>1 < s.bound
}

// tail reports whether any rule decided at the end may keep a request
// the head did not.
func (s *sampler) tail() bool { return s.errors || s.refusals || s.slow > 0 }

// keep is the decision at the end of the request.
func (s *sampler) keep(r *trace.Recording, c *pipeline.Ctx) bool {
	switch {
	case r.Sampled:
		return true
	case s.errors && r.Status >= 500:
		return true
	case s.refusals && refused(c):
		return true
	case s.slow > 0 && time.Duration(r.End-r.Start) >= s.slow:
		return true
	}
	return false
}

// refused reports an answer the gateway made itself instead of
// forwarding: a limit, the WAF, a signature, a breaker.
func refused(c *pipeline.Ctx) bool {
	st := c.Resp.StatusCode()
	return st >= 400 && (c.Outcome.Result == pipeline.ResultNone || c.Outcome.Result == pipeline.ResultOpen)
}
