package trace

import (
	"fmt"

	"github.com/tollgate/tollgate/codec"
	"github.com/valyala/fasthttp"
)

// Formats is a set of propagation formats.
type Formats uint8

const (
	W3C      Formats = 1 << iota // traceparent, tracestate
	B3Single                     // b3
	B3Multi                      // X-B3-TraceId, X-B3-SpanId, …
)

// formatNames are the formats as the configuration names them; reading
// "b3" takes either B3 form.
var formatNames = map[string]Formats{"w3c": W3C, "b3": B3Single, "b3multi": B3Multi}

// ParseFormats reads names (w3c, b3, b3multi) in the order given: Begin
// tries them in that order. forRead makes b3 stand for both B3 forms.
func ParseFormats(names []string, forRead bool) ([]Formats, error) {
	var out []Formats
	for _, n := range names {
		f, ok := formatNames[n]
		if !ok {
			return nil, fmt.Errorf("unknown propagation format %q (want w3c, b3 or b3multi)", n)
		}
		if forRead && f == B3Single {
			f |= B3Multi
		}
		out = append(out, f)
	}
	return out, nil
}

// Union is every format of fs.
func Union(fs []Formats) Formats {
	var u Formats
	for _, f := range fs {
		u |= f
	}
	return u
}

// maxTraceState is the longest tracestate passed on (the W3C's own
// limit for what a vendor must propagate); a longer one is dropped.
const maxTraceState = 512

const headerTraceState = "tracestate"

// BeginWith is Begin reading the formats of read, first found first
// (nil: W3C only), and writing those of write upstream (0: W3C).
func BeginWith(t *Context, r *codec.Received, h *fasthttp.RequestHeader, read []Formats, write Formats) {
	t.TraceState = nil
	t.Decided, t.Flags = false, 0
	found := false
	if read == nil {
		found = readW3C(t, r, h)
	}
	for _, f := range read {
		if found = readFormat(f, t, r, h); found {
			break
		}
	}
	if !found {
		// A lone B3 decision (b3: 0) is kept for the new trace.
		decided, flags := t.Decided, t.Flags
		newTrace(t)
		t.Decided, t.Flags = decided, flags
	}
	t.write = write
	finishBegin(t, r, h)
}

func readFormat(f Formats, t *Context, r *codec.Received, h *fasthttp.RequestHeader) bool {
	if f&W3C != 0 && readW3C(t, r, h) {
		return true
	}
	if f&B3Single != 0 {
		if v := r.Peek(h, headerB3); v != nil {
			if ids, ok := parseB3Single(v, t); ok {
				return ids
			}
			t.Decided, t.Flags = false, 0
		}
	}
	if f&B3Multi != 0 {
		if id := r.Peek(h, headerB3TraceID); id != nil {
			if parseB3Multi(id, r.Peek(h, headerB3SpanID), r.Peek(h, headerB3Sampled), r.Peek(h, headerB3Flags), t) {
				return true
			}
			t.Decided, t.Flags = false, 0
		}
	}
	return false
}

func readW3C(t *Context, r *codec.Received, h *fasthttp.RequestHeader) bool {
	if !parseTraceparent(r.Peek(h, headerTraceparent), t) {
		t.Decided, t.Flags = false, 0
		return false
	}
	if ts := r.Peek(h, headerTraceState); len(ts) > 0 && len(ts) <= maxTraceState {
		t.TraceState = ts
	}
	return true
}

// forwardB3 writes the B3 forms of write for the call upstream.
// ForwardAttempt makes the context Forward put in l name span, a try
// upstream (a child of the gateway's span), as the backend's parent: each
// try of a recorded request is a span of its own, and what the backend
// records belongs under the try that carried it. A try with no span (its
// request records no more) names the gateway's span again.
func (t *Context) ForwardAttempt(l *codec.FieldList, span *[8]byte) {
	var hex [16]byte
	if span == nil {
		hex = t.SpanHex
	} else {
		appendHex(hex[:0], span[:])
	}
	if t.write == 0 || t.write&W3C != 0 {
		if v := l.Get(headerTraceparent); len(v) == traceparentLen {
			copy(v[36:52], hex[:])
		}
	}
	if t.write&B3Single != 0 {
		if v := l.Get(headerB3); len(v) > 33+16 {
			copy(v[33:49], hex[:])
		}
	}
	if t.write&B3Multi != 0 {
		if v := l.Get(headerB3SpanID); len(v) == 16 {
			copy(v, hex[:])
		}
	}
}

func (t *Context) forwardB3(l *codec.FieldList) {
	if t.write&B3Single != 0 {
		var b [maxB3SingleLen]byte
		l.AddString(headerB3, t.appendB3Single(b[:0]))
	}
	if t.write&B3Multi != 0 {
		l.AddString(headerB3TraceID, t.TraceHex[:])
		l.AddString(headerB3SpanID, t.SpanHex[:])
		if t.hasB3Parent() {
			var p [16]byte
			l.AddString(headerB3ParentID, t.appendB3Parent(p[:0]))
		}
		l.AddString(headerB3Sampled, []byte{sampledDigit(t.Flags)})
	}
}
