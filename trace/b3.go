package trace

// B3 is Zipkin's propagation (openzipkin/b3-propagation), what Spring
// Cloud Sleuth and Brave send: one `b3` field, or the X-B3-* fields.
const (
	headerB3           = "b3"
	headerB3TraceID    = "X-B3-TraceId"
	headerB3SpanID     = "X-B3-SpanId"
	headerB3ParentID   = "X-B3-ParentSpanId"
	headerB3Sampled    = "X-B3-Sampled"
	headerB3Flags      = "X-B3-Flags"
	maxB3SingleLen     = 32 + 1 + 16 + 1 + 1 + 1 + 16
	b3TraceIDShortHex  = 16
	b3TraceIDLongHex   = 32
	b3SpanIDHex        = 16
	b3SampledAccept    = '1'
	b3SampledDeny      = '0'
	b3SampledDebugFlag = 'd'
)

// parseB3Single reads `b3: {trace id}-{span id}[-{sampling}[-{parent}]]`,
// or a lone sampling decision (`b3: 0`), which starts a new trace with
// the caller's decision. It reports whether t took the caller's ids
// (ids) and whether the value was usable at all (ok).
func parseB3Single(v []byte, t *Context) (ids, ok bool) {
	if len(v) == 1 {
		sampled, valid := b3Sampling(v)
		if valid {
			t.Decided = true
			t.Flags = flagsOf(sampled)
		}
		return false, valid
	}
	if len(v) > maxB3SingleLen {
		return false, false
	}
	traceEnd := indexByte(v, '-')
	if traceEnd < 0 || !parseB3TraceID(v[:traceEnd], t) {
		return false, false
	}
	rest := v[traceEnd+1:]
	if len(rest) < b3SpanIDHex || !unhex(t.ParentID[:], rest[:b3SpanIDHex]) || t.ParentID == [8]byte{} {
		return false, false
	}
	rest = rest[b3SpanIDHex:]
	t.Decided, t.Flags = false, 0
	if len(rest) == 0 {
		return true, true
	}
	if rest[0] != '-' || len(rest) < 2 {
		return false, false
	}
	sampled, valid := b3Sampling(rest[1:2])
	if !valid {
		return false, false
	}
	t.Decided, t.Flags = true, flagsOf(sampled)
	rest = rest[2:]
	// A parent span id may follow; the gateway's parent is the caller's
	// span, so it is only checked.
	if len(rest) != 0 && (len(rest) != 1+b3SpanIDHex || rest[0] != '-' || !validHex(rest[1:])) {
		return false, false
	}
	return true, true
}

// parseB3Multi reads the X-B3-* fields: a trace id and span id, an
// optional sampling decision (X-B3-Sampled 1/0, X-B3-Flags 1 for debug).
func parseB3Multi(traceID, spanID, sampled, flags []byte, t *Context) bool {
	if !parseB3TraceID(traceID, t) {
		return false
	}
	if len(spanID) != b3SpanIDHex || !unhex(t.ParentID[:], spanID) || t.ParentID == [8]byte{} {
		return false
	}
	t.Decided, t.Flags = false, 0
	switch {
	case len(flags) == 1 && flags[0] == '1':
		t.Decided, t.Flags = true, FlagSampled
	case len(sampled) > 0:
		s, ok := b3Sampling(sampled)
		if !ok {
			// Older tracers wrote true/false.
			switch string(sampled) {
			case "true":
				s, ok = true, true
			case "false":
				s, ok = false, true
			}
		}
		if !ok {
			return false
		}
		t.Decided, t.Flags = true, flagsOf(s)
	}
	return true
}

// parseB3TraceID reads a 64- or 128-bit trace id; a 64-bit one is the
// low half of the trace id, the high half zero, as B3 says to pad it.
func parseB3TraceID(v []byte, t *Context) bool {
	t.TraceID = [16]byte{}
	switch len(v) {
	case b3TraceIDLongHex:
		if !unhex(t.TraceID[:], v) {
			return false
		}
	case b3TraceIDShortHex:
		if !unhex(t.TraceID[8:], v) {
			return false
		}
	default:
		return false
	}
	return t.TraceID != [16]byte{}
}

func b3Sampling(v []byte) (sampled, ok bool) {
	if len(v) != 1 {
		return false, false
	}
	switch v[0] {
	case b3SampledAccept, b3SampledDebugFlag:
		return true, true
	case b3SampledDeny:
		return false, true
	}
	return false, false
}

func flagsOf(sampled bool) byte {
	if sampled {
		return FlagSampled
	}
	return 0
}

func validHex(v []byte) bool {
	for _, b := range v {
		if _, ok := hexVal(b); !ok {
			return false
		}
	}
	return true
}

func indexByte(v []byte, c byte) int {
	for i, b := range v {
		if b == c {
			return i
		}
	}
	return -1
}

// appendB3Single appends the b3 value for the call upstream: the trace,
// the gateway's span, the decision and the caller's span as parent.
func (t *Context) appendB3Single(dst []byte) []byte {
	dst = append(dst, t.TraceHex[:]...)
	dst = append(dst, '-')
	dst = append(dst, t.SpanHex[:]...)
	dst = append(dst, '-', sampledDigit(t.Flags))
	if t.hasB3Parent() {
		dst = t.appendB3Parent(append(dst, '-'))
	}
	return dst
}

// appendB3Parent appends the parent span B3 names beside the span it sends. A
// recorded request's tries are spans of their own (ForwardAttempt puts
// the try's in the span's place), so their parent is the gateway's span;
// otherwise the gateway's span is the one sent, and its parent the
// client's, when it named one.
func (t *Context) appendB3Parent(dst []byte) []byte {
	if t.Rec != nil {
		return append(dst, t.SpanHex[:]...)
	}
	return appendHex(dst, t.ParentID[:])
}

func (t *Context) hasB3Parent() bool { return t.Rec != nil || t.ParentID != [8]byte{} }

func sampledDigit(flags byte) byte {
	if flags&FlagSampled != 0 {
		return b3SampledAccept
	}
	return b3SampledDeny
}

func appendHex(dst, src []byte) []byte {
	for _, b := range src {
		dst = append(dst, hexDigits[b>>4], hexDigits[b&0x0f])
	}
	return dst
}
