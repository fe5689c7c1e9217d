package trace

import "github.com/tollgate/tollgate/internal/ascii"

// headerTraceparent is the W3C Trace Context field (lower case, as the
// spec writes it and as the gateway sends it upstream); the answer
// carries it as fasthttp would normalize it, set without a copy.
const (
	headerTraceparent          = "traceparent"
	headerTraceparentCanonical = "Traceparent"
)

// traceparentLen is the length of a version 00 traceparent value;
// maxTraceparent bounds what a future version may add.
const (
	traceparentLen = 55
	maxTraceparent = 256
)

// AppendTraceparent appends the W3C traceparent value for a call the gateway
// makes on the request's behalf: the request's trace id with the gateway's
// span as parent.
func (t *Context) AppendTraceparent(dst []byte) []byte {
	dst = append(dst, "00-"...)
	dst = append(dst, t.TraceHex[:]...)
	dst = append(dst, '-')
	dst = append(dst, t.SpanHex[:]...)
	dst = append(dst, '-', hexDigits[t.Flags>>4], hexDigits[t.Flags&0x0f])
	return dst
}

// parseTraceparent reads "00-<32 hex>-<16 hex>-<2 hex>" (RFC W3C Trace
// Context level 1). Unknown future versions are read by the same layout as
// the spec asks; version ff and all-zero ids are invalid.
func parseTraceparent(v []byte, t *Context) bool {
	if len(v) < traceparentLen || len(v) > maxTraceparent || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return false
	}
	if len(v) > traceparentLen && (v[0] == '0' && v[1] == '0' || v[55] != '-') {
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
	t.Flags, t.Decided = flags[0], true
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
