// Package trace is the gateway's trace context: what a request carries of
// the distributed trace it belongs to, and the request id. It owns the
// whole of it: reading the client's context (or starting a new trace),
// the gateway's own span, what goes upstream, and what the answer and the
// access log carry. A request meets it at three points, each a function
// here:
//
//   - Begin, once the client's header section is checked: read the
//     client's context, else generate one, and the gateway's span id.
//   - Forward, when the forwarding step builds the upstream request:
//     write the context the backend continues.
//   - Stamp, when the answer is done: give the client the context back.
//
// Everything after Begin reads the Context on the request (pipeline.Ctx's
// Trace field): canned answers and the access log take its hex ids.
//
// Formats are the W3C Trace Context traceparent (w3c.go) and the
// X-Request-Id field (requestid.go).
package trace

// Context is a request's trace context and request id.
//
// TraceID and ParentID come from the client's traceparent when it sent a
// valid one; SpanID is the gateway's own span, which becomes the parent of
// the upstream call. The hex arrays are filled once so that writing them
// into headers, bodies and logs costs no allocation.
type Context struct {
	TraceID  [16]byte
	SpanID   [8]byte
	ParentID [8]byte
	Flags    byte
	// TraceState is the caller's W3C tracestate, passed on with its
	// traceparent; it points into the request's header, valid until the
	// request is released.
	TraceState []byte
	// write is the formats Forward writes (0: W3C).
	write Formats

	// Decided says the caller made the sampling decision (its context
	// carried one): the sampled flag is then the caller's word.
	Decided bool

	TraceHex [32]byte
	SpanHex  [16]byte

	// RequestID is the client's X-Request-Id when acceptable, else the trace
	// id in hex. It lives in a buffer of the Context's own.
	RequestID []byte
	reqIDBuf  [maxRequestID]byte

	// Rec, when the request is traced (a tracing section is configured),
	// records its spans; nil otherwise, and every recording call is then
	// a no-op.
	Rec *Recording
}

// FlagSampled is the trace flags' sampled bit.
const FlagSampled = 0x01

// SetRequestID stores id (truncated to 64 bytes) as the request id.
func (t *Context) SetRequestID(id []byte) {
	n := copy(t.reqIDBuf[:], id)
	t.RequestID = t.reqIDBuf[:n]
}

// FillHex recomputes TraceHex and SpanHex from the binary ids.
func (t *Context) FillHex() {
	hexEncode(t.TraceHex[:], t.TraceID[:])
	hexEncode(t.SpanHex[:], t.SpanID[:])
}

const hexDigits = "0123456789abcdef"

func hexEncode(dst, src []byte) {
	for i, b := range src {
		dst[2*i] = hexDigits[b>>4]
		dst[2*i+1] = hexDigits[b&0x0f]
	}
}
