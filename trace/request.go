package trace

import (
	"encoding/binary"
	"math/rand/v2"

	"github.com/tollgate/tollgate/codec"
	"github.com/valyala/fasthttp"
)

// Begin fills t for a request whose header section is h (indexed in r by
// the check, when it passed): the client's trace id when it sent a valid
// traceparent (else a new one), a fresh span id for the gateway's hop, and
// the request id (the client's when acceptable, else the trace id).
// BeginWith reads other formats too.
func Begin(t *Context, r *codec.Received, h *fasthttp.RequestHeader) {
	BeginWith(t, r, h, nil, 0)
}

// newTrace starts a trace at the gateway: no caller, no decision.
func newTrace(t *Context) {
	binary.LittleEndian.PutUint64(t.TraceID[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(t.TraceID[8:], rand.Uint64())
	t.ParentID = [8]byte{}
	t.Flags, t.Decided = 0, false
	t.TraceState = nil
}

// finishBegin draws the gateway's span id and takes the request id.
func finishBegin(t *Context, r *codec.Received, h *fasthttp.RequestHeader) {
	binary.LittleEndian.PutUint64(t.SpanID[:], rand.Uint64()|1)
	t.FillHex()
	if id := r.Peek(h, headerRequestID); validRequestID(id) {
		t.SetRequestID(id)
	} else {
		t.SetRequestID(t.TraceHex[:])
	}
}

// Forward adds the context the backend continues to the upstream
// request's fields: the trace with the gateway's span as parent, and the
// request id. (The client's own copies never reach l: the fields are
// the gateway's alone, codec.GatewayOwned.)
func Forward(t *Context, l *codec.FieldList) {
	if t.write == 0 || t.write&W3C != 0 {
		var tp [traceparentLen]byte
		l.AddString(headerTraceparent, t.AppendTraceparent(tp[:0]))
		if t.TraceState != nil {
			l.AddString(headerTraceState, t.TraceState)
		}
	}
	t.forwardB3(l)
	l.AddString(headerRequestID, t.RequestID)
}

// Stamp gives the client the context back on its answer. An answer held
// as read (a, when active) gets it as two more lines: reading it left out
// the backend's own copies (codec.Answer); otherwise h's are replaced.
func Stamp(t *Context, h *fasthttp.ResponseHeader, a *codec.Answer) {
	var tp [traceparentLen]byte
	v := t.AppendTraceparent(tp[:0])
	if a.Active() {
		a.Add(headerTraceparentCanonical, v)
		a.Add(headerRequestID, t.RequestID)
		return
	}
	h.SetCanonical(strTraceparentCanonical, v)
	h.SetCanonical(strRequestID, t.RequestID)
}

var (
	strTraceparentCanonical = []byte(headerTraceparentCanonical)
	strRequestID            = []byte(headerRequestID)
)

// The trace's fields are the gateway's word both ways: a client's copies
// are not forwarded (Forward writes the gateway's, in the formats it is
// told to) and a backend's do not reach the client (Stamp writes the
// gateway's). A client's tracestate goes on only with the traceparent it
// belongs to.
func init() {
	codec.StampedByGateway(headerTraceparent, headerTraceState, headerRequestID,
		headerB3, headerB3TraceID, headerB3SpanID, headerB3ParentID, headerB3Sampled, headerB3Flags)
}
