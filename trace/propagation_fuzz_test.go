package trace

import (
	"testing"

	"github.com/tollgate/tollgate/codec"
	"github.com/valyala/fasthttp"
)

// FuzzBeginWith: whatever a client puts in the trace fields, reading them
// never fails, never yields an all-zero id, and what goes upstream reads
// back as the same trace.
func FuzzBeginWith(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1-05e3ac9a4f6e3b90",
		"463ac35c9f6413ad48485a3953bb6124", "a2fb4a1d1a96d312", "1", "")
	f.Add("", "0", "", "", "", "")
	f.Add("ff-x", "64fe8b2a57d3eff7-e457b5a2e4d86bd1", "48485a3953bb6124", "a2fb4a1d1a96d312", "true", "1")
	f.Fuzz(func(t *testing.T, tp, b3, b3Trace, b3Span, b3Sampled, b3Flags string) {
		var h fasthttp.RequestHeader
		for name, v := range map[string]string{"traceparent": tp, "b3": b3, "X-B3-TraceId": b3Trace,
			"X-B3-SpanId": b3Span, "X-B3-Sampled": b3Sampled, "X-B3-Flags": b3Flags} {
			if v != "" {
				h.Set(name, v)
			}
		}
		var c Context
		BeginWith(&c, new(codec.Received), &h, []Formats{W3C, B3Single | B3Multi}, W3C|B3Single|B3Multi)
		if c.TraceID == [16]byte{} || c.SpanID == [8]byte{} {
			t.Fatalf("zero id: trace %x span %x", c.TraceID, c.SpanID)
		}
		var l codec.FieldList
		Forward(&c, &l)
		var back Context
		if !parseTraceparent(l.Get("traceparent"), &back) || back.TraceID != c.TraceID || back.ParentID != c.SpanID {
			t.Fatalf("forwarded %q does not read back as trace %x span %x", l.Get("traceparent"), c.TraceID, c.SpanID)
		}
		if ids, ok := parseB3Single(l.Get("b3"), &back); !ok || !ids || back.TraceID != c.TraceID || back.ParentID != c.SpanID {
			t.Fatalf("forwarded b3 %q does not read back", l.Get("b3"))
		}
	})
}
