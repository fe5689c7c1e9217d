package record

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/tollgate/tollgate/internal/bytesconv"
)

// appendLine appends e as one JSON line of a recording file (the shape
// Entry reads). It runs on the writer's goroutine.
func (e *entry) appendLine(dst []byte) []byte {
	dst = append(dst, `{"time":"`...)
	dst = e.at.UTC().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, '"')
	dst = appendField(dst, "route", e.route)
	if e.consumer != "" {
		dst = appendField(dst, "consumer", e.consumer)
	}
	if e.traceID[0] != 0 {
		dst = appendFieldBytes(dst, "trace_id", e.traceID[:])
	}
	dst = appendFieldBytes(dst, "request_id", e.requestID)
	if e.service != "" {
		dst = appendField(dst, "service", e.service)
	}
	dst = appendFieldBytes(dst, "method", e.method)
	dst = appendFieldBytes(dst, "host", e.host)
	dst = appendFieldBytes(dst, "target", e.target)
	dst = appendHeaders(dst, "req_headers", e.reqHeaders)
	dst = appendBody(dst, "req_body", e.reqBody, e.req)
	dst = append(dst, `,"status":`...)
	dst = strconv.AppendInt(dst, int64(e.status), 10)
	dst = appendHeaders(dst, "resp_headers", e.respHeaders)
	dst = appendBody(dst, "resp_body", e.respBody, e.resp)
	dst = append(dst, `,"latency_us":`...)
	dst = strconv.AppendInt(dst, e.latency.Microseconds(), 10)
	dst = append(dst, `,"upstream_us":`...)
	dst = strconv.AppendInt(dst, e.upstream.Microseconds(), 10)
	return append(dst, "}\n"...)
}

func appendField(dst []byte, name, v string) []byte {
	dst = append(append(append(dst, `,"`...), name...), `":`...)
	return appendString(dst, v)
}

func appendFieldBytes(dst []byte, name string, v []byte) []byte {
	dst = append(append(append(dst, `,"`...), name...), `":`...)
	return appendJSONString(dst, v)
}

// appendHeaders appends the "name:value\n" lines as [["name","value"],…].
func appendHeaders(dst []byte, name string, lines []byte) []byte {
	dst = append(append(append(dst, `,"`...), name...), `":[`...)
	for first := true; len(lines) > 0; first = false {
		line := lines
		if i := bytes.IndexByte(lines, '\n'); i >= 0 {
			line, lines = lines[:i], lines[i+1:]
		} else {
			lines = nil
		}
		k, v, _ := bytes.Cut(line, []byte(":"))
		if !first {
			dst = append(dst, ',')
		}
		dst = append(appendJSONString(append(dst, '['), k), ',')
		dst = append(appendJSONString(dst, v), ']')
	}
	return append(dst, ']')
}

// appendBody appends a body as name (text), or name_b64 when it is not
// UTF-8, with what the record says about it.
func appendBody(dst []byte, name string, body []byte, st bodyState) []byte {
	switch {
	case st.omitted != kept:
		dst = append(append(append(dst, `,"`...), name...), `_omitted":`...)
		return appendString(dst, omissionNames[st.omitted])
	case utf8.Valid(body):
		dst = append(append(append(dst, `,"`...), name...), `":`...)
		dst = appendJSONString(dst, body)
	default:
		dst = append(append(append(dst, `,"`...), name...), `_b64":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, body)
		dst = append(dst, '"')
	}
	if st.cut {
		dst = append(append(append(dst, `,"`...), name...), `_cut":true`...)
	}
	if st.decoded {
		dst = append(append(append(dst, `,"`...), name...), `_decoded":true`...)
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Bytes that are not UTF-8 (a
// header value with obs-text) become U+FFFD: JSON has no way to carry them.
func appendString(dst []byte, s string) []byte { return appendJSONString(dst, bytesconv.S2B(s)) }

// appendJSONString is appendString for bytes.
func appendJSONString(dst, b []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(b); {
		// Runs of plain ASCII, the bulk of bodies, go eight bytes at a time.
		for i+8 <= len(b) && plainWord(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(b[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			dst = append(dst, b[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		dst = append(dst, b[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, b[start:]...)
	return append(dst, '"')
}

// plainWord reports whether the eight bytes of x are all printable ASCII
// other than '"' and '\\': bytes a JSON string carries as they are.
func plainWord(x uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	below := (x - lo*0x20) & ^x & hi
	quote := x ^ (lo * '"')
	slash := x ^ (lo * '\\')
	return (x&hi | below | (quote-lo)&^quote&hi | (slash-lo)&^slash&hi) == 0
}
