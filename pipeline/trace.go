package pipeline

// Trace is a request's W3C trace context and request id.
//
// TraceID and ParentID come from the client's traceparent when it sent a
// valid one; SpanID is the gateway's own span, which becomes the parent of
// the upstream call. The hex arrays are filled once so that writing them
// into headers, bodies and logs costs no allocation.
type Trace struct {
	TraceID  [16]byte
	SpanID   [8]byte
	ParentID [8]byte
	Flags    byte

	TraceHex [32]byte
	SpanHex  [16]byte

	// RequestID is the client's X-Request-Id when acceptable, else the trace
	// id in hex. It lives in a buffer owned by the Ctx.
	RequestID []byte
	reqIDBuf  [64]byte
}

// SetRequestID stores id (truncated to 64 bytes) as the request id.
func (t *Trace) SetRequestID(id []byte) {
	n := copy(t.reqIDBuf[:], id)
	t.RequestID = t.reqIDBuf[:n]
}

// FillHex recomputes TraceHex and SpanHex from the binary ids.
func (t *Trace) FillHex() {
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

// AppendTraceparent appends the W3C traceparent value for a call the gateway
// makes on the request's behalf: the request's trace id with the gateway's
// span as parent.
func (t *Trace) AppendTraceparent(dst []byte) []byte {
	dst = append(dst, "00-"...)
	dst = append(dst, t.TraceHex[:]...)
	dst = append(dst, '-')
	dst = append(dst, t.SpanHex[:]...)
	dst = append(dst, '-', hexDigits[t.Flags>>4], hexDigits[t.Flags&0x0f])
	return dst
}
