package record

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/tollgate/tollgate/internal/jsonstr"
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
	return jsonstr.AppendString(dst, v)
}

func appendFieldBytes(dst []byte, name string, v []byte) []byte {
	dst = append(append(append(dst, `,"`...), name...), `":`...)
	return jsonstr.Append(dst, v)
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
		dst = append(jsonstr.Append(append(dst, '['), k), ',')
		dst = append(jsonstr.Append(dst, v), ']')
	}
	return append(dst, ']')
}

// appendBody appends a body as name (text), or name_b64 when it is not
// UTF-8, with what the record says about it.
func appendBody(dst []byte, name string, body []byte, st bodyState) []byte {
	switch {
	case st.omitted != kept:
		dst = append(append(append(dst, `,"`...), name...), `_omitted":`...)
		return jsonstr.AppendString(dst, omissionNames[st.omitted])
	case utf8.Valid(body):
		dst = append(append(append(dst, `,"`...), name...), `":`...)
		dst = jsonstr.Append(dst, body)
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
