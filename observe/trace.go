// Package observe records what the gateway did: trace context (W3C
// traceparent and X-Request-Id), the asynchronous access log, and counters.
// Nothing here does I/O on the request path.
package observe

import (
	"encoding/binary"
	"math/rand/v2"

	"github.com/tollgate/tollgate/internal/ascii"
	"github.com/tollgate/tollgate/pipeline"
)

var (
	strRequestID = []byte("X-Request-Id")
	// The answer's names as fasthttp would normalize them, so that they
	// are set without a copy and a normalizing pass.
	strTraceparentCanonical = []byte("Traceparent")
)

// StartTrace fills c.Trace: the client's trace id when it sent a valid
// traceparent (else a new one), a fresh span id for the gateway's hop, and
// the request id (the client's when acceptable, else the trace id).
func StartTrace(c *pipeline.Ctx) {
	t := &c.Trace
	if !parseTraceparent(c.Received.Traceparent(&c.Req.Header), t) {
		binary.LittleEndian.PutUint64(t.TraceID[:8], rand.Uint64())
		binary.LittleEndian.PutUint64(t.TraceID[8:], rand.Uint64())
		t.ParentID = [8]byte{}
		t.Flags = 0
	}
	binary.LittleEndian.PutUint64(t.SpanID[:], rand.Uint64()|1)
	t.FillHex()
	if id := c.Received.RequestID(&c.Req.Header); validRequestID(id) {
		t.SetRequestID(id)
	} else {
		t.SetRequestID(t.TraceHex[:])
	}
}

// StampResponse returns the trace context to the client.
// An answer held as read (c.Answer) gets them as two more lines: Read
// left out the backend's own copies.
func StampResponse(c *pipeline.Ctx) {
	c.Scratch = c.Trace.AppendTraceparent(c.Scratch[:0])
	if a := c.Answer; a.Active() {
		a.Add("Traceparent", c.Scratch)
		a.Add("X-Request-Id", c.Trace.RequestID)
		return
	}
	c.Resp.Header.SetCanonical(strTraceparentCanonical, c.Scratch)
	c.Resp.Header.SetCanonical(strRequestID, c.Trace.RequestID)
}

// validRequestID accepts ids a log line and a header can carry verbatim.
func validRequestID(id []byte) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for _, b := range id {
		switch {
		case b >= '0' && b <= '9', b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b == '-', b == '_', b == '.', b == ':':
		default:
			return false
		}
	}
	return true
}

// parseTraceparent reads "00-<32 hex>-<16 hex>-<2 hex>" (RFC W3C Trace
// Context level 1). Unknown future versions are read by the same layout as
// the spec asks; version ff and all-zero ids are invalid.
func parseTraceparent(v []byte, t *pipeline.Trace) bool {
	if len(v) < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return false
	}
	if len(v) > 55 && (v[0] == '0' && v[1] == '0' || v[55] != '-') {
		return false
	}
	var ver [1]byte
	if !unhex(ver[:], v[0:2]) || ver[0] == 0xff {
		return false
	}
	var flags [1]byte
	if !unhex(t.TraceID[:], v[3:35]) || !unhex(t.ParentID[:], v[36:52]) || !unhex(flags[:], v[53:55]) {
		return false
	}
	if t.TraceID == [16]byte{} || t.ParentID == [8]byte{} {
		return false
	}
	t.Flags = flags[0]
	return true
}

func unhex(dst, src []byte) bool {
	for i := range dst {
		hi, ok1 := hexVal(src[2*i])
		lo, ok2 := hexVal(src[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

// hexVal accepts lowercase only, as the spec requires.
func hexVal(b byte) (byte, bool) {
	if 'A' <= b && b <= 'F' {
		return 0, false
	}
	v := ascii.Unhex(b)
	return byte(v), v >= 0
}
