package pipeline

import (
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/internal/jsonstr"
)

var contentTypeJSON = []byte("application/json")

// Canned is a gateway-made error answer in the shape every such answer has:
// {"code":N,"message":"...","trace_id":"..."} with Content-Type
// application/json. Everything but the trace id is rendered when the Canned
// is built, so answering with it allocates nothing.
type Canned struct {
	Status  int
	Message string
	prefix  []byte // {"code":N,"message":"...","trace_id":"
	suffix  []byte // "}
	headers [][2][]byte
}

// WithHeader returns a copy of e that also sets the response header name
// (Retry-After, WWW-Authenticate, X-RateLimit-*, …). Build it at config
// load: the answer is still written without rendering anything.
func (e *Canned) WithHeader(name, value string) *Canned {
	cp := *e
	cp.headers = append(append([][2][]byte(nil), e.headers...), [2][]byte{[]byte(name), []byte(value)})
	return &cp
}

// NewCanned renders a canned answer for status with a human message. The
// body's code is the status itself (the SPEC's rule for gateway errors).
func NewCanned(status int, message string) *Canned {
	var b strings.Builder
	b.WriteString(`{"code":`)
	b.WriteString(strconv.Itoa(status))
	b.WriteString(`,"message":`)
	b.WriteString(strconv.Quote(message))
	b.WriteString(`,"trace_id":"`)
	return &Canned{Status: status, Message: message, prefix: []byte(b.String()), suffix: []byte(`"}`)}
}

// WriteTo replaces c's response with this answer, stamped with c's trace id.
func (e *Canned) WriteTo(c *Ctx) {
	r := c.Resp
	c.DropAnswer()
	r.Reset()
	r.SetStatusCode(e.Status)
	r.Header.SetContentTypeBytes(contentTypeJSON)
	r.AppendBody(e.prefix)
	r.AppendBody(c.Trace.TraceHex[:])
	r.AppendBody(e.suffix)
	for _, h := range e.headers {
		r.Header.SetBytesKV(h[0], h[1])
	}
	if c.Decision == "" {
		c.Decision = e.Message
	}
	c.traceAnswer(e.Status, e.Message)
}

// Static is a fixed answer a route gives by itself (a degraded answer, a
// configured not-found page). Unlike Canned it is written as configured.
type Static struct {
	Status      int
	ContentType []byte
	Body        []byte
	Headers     [][2][]byte
}

// WriteTo replaces c's response with s.
func (s *Static) WriteTo(c *Ctx) {
	r := c.Resp
	c.DropAnswer()
	r.Reset()
	r.SetStatusCode(s.Status)
	if len(s.ContentType) > 0 {
		r.Header.SetContentTypeBytes(s.ContentType)
	}
	for _, h := range s.Headers {
		r.Header.SetBytesKV(h[0], h[1])
	}
	r.SetBodyRaw(s.Body)
}

// WriteError answers c with a gateway error whose message is known only
// while serving (a field a request got wrong, a backend's status message),
// in the shape of Canned answers: {"code":N,"message":"...",<extra>,
// "trace_id":"..."}, where extra are name/value pairs of string members.
// It allocates; Canned is for the answers that can be built at load.
func WriteError(c *Ctx, status int, message string, extra ...string) {
	r := c.Resp
	c.DropAnswer()
	r.Reset()
	r.SetStatusCode(status)
	r.Header.SetContentTypeBytes(contentTypeJSON)
	b := c.Scratch[:0]
	b = append(b, `{"code":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"message":`...)
	b = jsonstr.AppendString(b, message)
	for i := 0; i+1 < len(extra); i += 2 {
		b = append(b, ',')
		b = jsonstr.AppendString(b, extra[i])
		b = append(b, ':')
		b = jsonstr.AppendString(b, extra[i+1])
	}
	b = append(b, `,"trace_id":"`...)
	b = append(b, c.Trace.TraceHex[:]...)
	b = append(b, `"}`...)
	r.SetBody(b)
	c.Scratch = b[:0]
	if c.Decision == "" {
		c.Decision = message
	}
	c.traceAnswer(status, message)
}
