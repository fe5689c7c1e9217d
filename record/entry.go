package record

import (
	"sync"
	"time"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/internal/ascii"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/source"
)

// entry is one exchange being recorded. The recording step fills it from
// the request in Handle and from the answer in HandleResponse, masking as
// it copies, so nothing it holds is a secret or borrowed from the request;
// the writer's goroutine encodes it and pools it again.
type entry struct {
	at                       time.Time
	latency, upstream        time.Duration
	route, consumer, service string // immutable strings of the snapshot or a token cache
	traceID                  [32]byte
	requestID                []byte
	method, host, target     []byte
	reqHeaders, respHeaders  []byte // "name:value\n" lines, values masked
	reqBody, respBody        []byte
	req, resp                bodyState
	status                   int

	sec     secrets
	spans   [][2]int
	scratch []byte
}

var entryPool = sync.Pool{New: func() any { return new(entry) }}

// bodyState says what a record kept of a body.
type bodyState struct {
	omitted omission
	cut     bool // longer than max_body: the first max_body bytes are kept
	decoded bool // kept decoded from its Content-Encoding
}

// omission says why a body was not kept.
type omission uint8

const (
	kept       omission = iota
	streamed            // never in memory (larger than stream_body_bytes)
	encoded             // a Content-Encoding not decoded, or larger than max_body decoded
	unreadable          // declared JSON but invalid: a masked value could hide past the error
	multipart           // multipart parts are not masked one by one
)

var omissionNames = [...]string{"", "streamed", "encoded", "unreadable json", "multipart"}

// bodyKind is how a body is masked.
type bodyKind uint8

const (
	plainBody bodyKind = iota
	formBody
	jsonBody
	multipartBody // kept part by part (multipart.go), or left out when it does not read
)

// takeRequest fills e from c's request as the client sent it: the routed
// Host, the canonical target, the header fields in order and the body,
// masked. secret is the calling consumer's app secret, blotted out
// wherever it appears.
func (e *entry) takeRequest(c *pipeline.Ctx, m *masks, maxBody int, secret []byte) {
	e.sec.reset()
	e.sec.add(secret)
	e.at = c.Start
	e.route, e.consumer = c.RouteName, c.Consumer
	e.traceID = c.Trace.TraceHex
	e.requestID = append(e.requestID[:0], c.Trace.RequestID...)
	e.method = append(e.method[:0], c.Req.Header.Method()...)
	e.host = append(e.host[:0], c.Target.Host...)
	e.target = append(e.target[:0], c.Target.Path...)
	if c.Target.HasQuery {
		e.target = append(e.target, '?')
		e.target, e.scratch = appendParams(e.target, c.Target.Query, m.query, &e.sec, e.scratch)
	}
	e.reqHeaders = e.reqHeaders[:0]
	for k, v := range codec.Fields(&c.Req.Header) {
		if ascii.EqualFold(k, "Content-Length") {
			continue // the length of the body as sent, not as kept (masked, cut)
		}
		e.reqHeaders = e.appendField(e.reqHeaders, k, v, m)
	}
	req := c.Req
	ct := req.Header.ContentType()
	switch {
	case req.IsBodyStream():
		e.reqBody, e.req = e.reqBody[:0], bodyState{omitted: streamed}
	case codec.ContentEncoded(&req.Header):
		body, err := req.BodyUncompressedWithLimit(maxBody)
		e.reqBody, e.req = e.keepDecoded(e.reqBody[:0], body, err, ct, m, maxBody)
	default:
		e.reqBody, e.req = e.keepBody(e.reqBody[:0], req.Body(), ct, m, maxBody)
	}
}

// takeResponse completes e with c's answer, then blots out the request's
// secrets wherever they recur in the record.
func (e *entry) takeResponse(c *pipeline.Ctx, m *masks, maxBody int, now time.Time) {
	resp := c.Resp
	e.status = resp.StatusCode()
	e.latency = now.Sub(c.Start)
	e.upstream, e.service = c.Outcome.Latency, c.Outcome.Service
	e.respHeaders = e.respHeaders[:0]
	for k, v := range resp.Header.All() {
		if ascii.EqualFold(k, "Content-Length") {
			continue // describes the answer as sent, not the body kept
		}
		e.respHeaders = e.appendField(e.respHeaders, k, v, m)
	}
	ct := resp.Header.ContentType()
	switch {
	case resp.IsBodyStream():
		e.respBody, e.resp = e.respBody[:0], bodyState{omitted: streamed}
	case len(resp.Header.ContentEncoding()) > 0 && !ascii.EqualFold(resp.Header.ContentEncoding(), "identity"):
		body, err := resp.BodyUncompressedWithLimit(maxBody)
		e.respBody, e.resp = e.keepDecoded(e.respBody[:0], body, err, ct, m, maxBody)
	default:
		e.respBody, e.resp = e.keepBody(e.respBody[:0], resp.Body(), ct, m, maxBody)
	}
	e.target = e.sec.scrub(e.target)
	e.reqHeaders = e.sec.scrub(e.reqHeaders)
	e.reqBody = e.sec.scrub(e.reqBody)
	e.respHeaders = e.sec.scrub(e.respHeaders)
	e.respBody = e.sec.scrub(e.respBody)
}

// appendField appends one "name:value\n" line, the value masked when the
// masks name the field.
func (e *entry) appendField(dst, k, v []byte, m *masks) []byte {
	dst = append(append(dst, k...), ':')
	if m.header(k) {
		dst = appendHeaderValue(dst, k, v, &e.sec)
	} else {
		dst = append(dst, v...)
	}
	return append(dst, '\n')
}

// keepBody appends what a record keeps of body, whose Content-Type is ct:
// masked as its kind says (form and multipart fields the masks name; JSON
// values they designate), then cut at maxBody.
func (e *entry) keepBody(dst, body, ct []byte, m *masks, maxBody int) ([]byte, bodyState) {
	var st bodyState
	kind := kindOf(ct)
	if kind == plainBody && looksJSON(body) {
		kind = jsonBody
	}
	switch kind {
	case multipartBody:
		boundary := boundaryOf(ct)
		if boundary == nil {
			return dst, bodyState{omitted: multipart}
		}
		// Only what is kept is read, as for JSON: a field cut short is
		// masked as far as it is kept.
		if len(body) > maxBody {
			body, st.cut = body[:maxBody], true
		}
		start := len(dst)
		var whole bool
		if dst, whole = e.appendMultipart(dst, body, boundary, st.cut, m); !whole {
			return dst[:start], bodyState{omitted: multipart}
		}
		if len(dst)-start > maxBody {
			dst, st.cut = dst[:start+maxBody], true
		}
		return dst, st
	case formBody:
		if len(body) > maxBody {
			// Cutting first is safe: a masked parameter cut short keeps its
			// name, and one whose name is cut lost its value too.
			body, st.cut = body[:maxBody], true
		}
		dst, e.scratch = appendParams(dst, body, m.form, &e.sec, e.scratch)
		if len(dst) > maxBody {
			dst, st.cut = dst[:maxBody], true
		}
		return dst, st
	case jsonBody:
		// Only what is kept is read: a longer body is masked as far as it
		// is kept, so a huge body costs no more than max_body.
		if len(body) > maxBody {
			body, st.cut = body[:maxBody], true
		}
		var whole bool
		start := len(dst)
		if dst, e.spans, whole = m.appendJSON(dst, body, st.cut, e.spans, &e.sec); !whole {
			return dst[:start], bodyState{omitted: unreadable}
		}
		if len(dst)-start > maxBody {
			dst, st.cut = dst[:start+maxBody], true
		}
		return dst, st
	}
	if len(body) > maxBody {
		body, st.cut = body[:maxBody], true
	}
	return append(dst, body...), st
}

// keepDecoded keeps a body decoded from its Content-Encoding (at most
// maxBody decoded), or notes that it could not.
func (e *entry) keepDecoded(dst, body []byte, err error, ct []byte, m *masks, maxBody int) ([]byte, bodyState) {
	if err != nil {
		return dst, bodyState{omitted: encoded}
	}
	dst, st := e.keepBody(dst, body, ct, m, maxBody)
	st.decoded = st.omitted == kept
	return dst, st
}

// kindOf classifies a Content-Type: urlencoded form, JSON, multipart, or
// anything else.
func kindOf(ct []byte) bodyKind {
	switch source.MediaOf(ct) {
	case source.MediaForm:
		return formBody
	case source.MediaJSON:
		return jsonBody
	}
	if len(ct) >= len("multipart/") && ascii.EqualFold(ct[:len("multipart/")], "multipart/") {
		return multipartBody
	}
	return plainBody
}

// looksJSON reports a body that starts like a JSON object or array: many
// backends parse JSON whatever the Content-Type says, so such a body is
// masked as JSON (or left out when it does not read whole).
func looksJSON(body []byte) bool {
	for _, c := range body {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{', '[':
			return true
		}
		return false
	}
	return false
}

// release returns e to the pool.
func (e *entry) release() {
	e.route, e.consumer, e.service = "", "", ""
	entryPool.Put(e)
}
