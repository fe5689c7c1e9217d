package trace

import (
	"reflect"
	"testing"
	"time"
)

// TestRecordingBoundsAndReuse: a request records at most maxChildren
// steps and maxEvents events (the rest counted), and a released
// recording comes back empty.
func TestRecordingBoundsAndReuse(t *testing.T) {
	var c Context
	if h := c.StartSpan(SpanUpstream, time.Now()); h != NoSpan || c.Span(h) != nil {
		t.Fatal("an unrecorded request got a span")
	}
	c.EndSpan(NoSpan, time.Now())
	c.AddEvent("x", time.Now(), 500, "m")
	c.Rec = NewRecording()
	for i := range maxChildren + 3 {
		h := c.StartSpan(SpanUpstream, time.Now())
		if (h == NoSpan) != (i >= maxChildren) {
			t.Fatalf("span %d: handle %d", i, h)
		}
		if sp := c.Span(h); sp != nil {
			sp.Instance = "i"
		}
		c.EndSpan(h, time.Now())
	}
	for range maxEvents + 2 {
		c.AddEvent("refused", time.Now(), 429, "limit")
	}
	r := c.Rec
	if len(r.Spans()) != maxChildren || r.DroppedSpans != 3 || len(r.Events()) != maxEvents || r.DroppedEvent != 2 {
		t.Fatalf("spans %d dropped %d, events %d dropped %d", len(r.Spans()), r.DroppedSpans, len(r.Events()), r.DroppedEvent)
	}
	if r.SpanCount() != 1+maxChildren {
		t.Fatalf("span count %d", r.SpanCount())
	}
	r.Status = 500
	r.Release()
	if !reflect.DeepEqual(*r, Recording{}) {
		t.Fatal("a released recording kept what it held")
	}
}
