package tracing

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/trace"
)

// collecting keeps what it is offered.
type collecting struct{ got []*trace.Recording }

func (s *collecting) Offer(r *trace.Recording) { s.got = append(s.got, r) }

func tracerFor(t *testing.T, yamlish Settings) (*Tracer, *collecting) {
	t.Helper()
	if err := yamlish.defaults(); err != nil {
		t.Fatal(err)
	}
	sink := &collecting{}
	tr := &Tracer{sink: sink}
	if err := tr.configure(&yamlish); err != nil {
		t.Fatal(err)
	}
	return tr, sink
}

// TestHeadRatio: a share of new traces is kept, decided by the trace id;
// a caller's decision is kept either way, and passed on upstream.
func TestHeadRatio(t *testing.T) {
	tr, _ := tracerFor(t, Settings{Sample: ptr(0.1), Errors: ptr(false)})
	kept := 0
	const n = 20000
	for range n {
		var tc trace.Context
		binary.LittleEndian.PutUint64(tc.TraceID[:8], rand.Uint64())
		binary.LittleEndian.PutUint64(tc.TraceID[8:], rand.Uint64())
		if tr.sampler.head(&tc) {
			kept++
		}
	}
	if kept < n/10-400 || kept > n/10+400 {
		t.Fatalf("sample 0.1 kept %d of %d", kept, n)
	}
	never, _ := tracerFor(t, Settings{Sample: ptr(0.0), Errors: ptr(false)})
	always, _ := tracerFor(t, Settings{Sample: ptr(1.0)})
	var tc trace.Context
	tc.TraceID = [16]byte{15: 1}
	if never.sampler.head(&tc) || !always.sampler.head(&tc) {
		t.Fatal("sample 0 kept, or sample 1 did not")
	}
	tc.Decided, tc.Flags = true, trace.FlagSampled
	if !never.sampler.head(&tc) {
		t.Fatal("a caller's sampled flag was overruled by sample 0")
	}
	tc.Flags = 0
	if always.sampler.head(&tc) {
		t.Fatal("a caller's unsampled flag was overruled by sample 1")
	}

	c := recordedCtx(t) // its traceparent says sampled
	never.Begin(c)
	if c.Trace.Flags&trace.FlagSampled == 0 || c.Trace.Rec == nil || !c.Trace.Rec.Sampled {
		t.Fatal("the caller's sampled request was not recorded as sampled")
	}
	never.End(c, time.Now())
	c = freshCtx(t)
	never.Begin(c)
	if c.Trace.Rec != nil || c.Trace.Flags&trace.FlagSampled != 0 {
		t.Fatal("sample 0 without a tail rule recorded a request, or flagged it sampled upstream")
	}
}

// TestTailKeeps: errors, slow requests and (when asked) refusals are kept
// though the head did not sample them; the rest are not.
func TestTailKeeps(t *testing.T) {
	tr, sink := tracerFor(t, Settings{Sample: ptr(0.0), Slow: ptr(pipeline.Duration(50 * time.Millisecond)), Refusals: true})
	run := func(status int, took time.Duration, upstream pipeline.Result) bool {
		c := freshCtx(t)
		c.Start = time.Now().Add(-took)
		tr.Begin(c)
		c.Outcome.Result = upstream
		c.Resp.SetStatusCode(status)
		before := len(sink.got)
		tr.End(c, time.Now())
		pipeline.Release(c)
		return len(sink.got) > before
	}
	for _, tc := range []struct {
		status   int
		took     time.Duration
		upstream pipeline.Result
		want     bool
	}{
		{200, time.Millisecond, pipeline.ResultOK, false},
		{502, time.Millisecond, pipeline.ResultRefused, true},
		{503, time.Millisecond, pipeline.ResultOK, true},
		{200, 60 * time.Millisecond, pipeline.ResultOK, true},
		{429, time.Millisecond, pipeline.ResultNone, true},
		{404, time.Millisecond, pipeline.ResultOK, false},
	} {
		if got := run(tc.status, tc.took, tc.upstream); got != tc.want {
			t.Errorf("status %d after %s (%s): kept %v, want %v", tc.status, tc.took, tc.upstream, got, tc.want)
		}
	}
	quiet, sink2 := tracerFor(t, Settings{Sample: ptr(0.0)})
	c := freshCtx(t)
	quiet.Begin(c)
	c.Resp.SetStatusCode(429)
	quiet.End(c, time.Now())
	if len(sink2.got) != 0 {
		t.Fatal("a refusal was kept with refusals off")
	}
}
