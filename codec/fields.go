package codec

import (
	"bytes"
	"iter"

	"github.com/tollgate/tollgate/internal/ascii"

	"github.com/valyala/fasthttp"
)

// Fields yields the request's header fields in the order and with the
// bytes they were received in (the value without surrounding whitespace).
// Unlike fasthttp's AllInOrder it never rewrites the received names in
// place, so the names forwarded upstream keep the client's spelling. h must
// come from a parser whose section Check accepted; for a header built by
// hand (no raw section) it falls back to fasthttp's All. The slices alias
// the request and are valid until it is reset.
func Fields(h *fasthttp.RequestHeader) iter.Seq2[[]byte, []byte] {
	return func(yield func([]byte, []byte) bool) {
		raw := h.RawHeaders()
		if len(raw) == 0 {
			for k, v := range h.All() {
				if !yield(k, v) {
					return
				}
			}
			return
		}
		for len(raw) > 0 {
			var line []byte
			line, raw = nextLine(raw)
			colon := bytes.IndexByte(line, ':')
			if colon <= 0 {
				continue
			}
			if !yield(line[:colon], ascii.TrimOWS(line[colon+1:])) {
				return
			}
		}
	}
}

// ContentEncoded reports whether any Content-Encoding field of h names a
// coding other than identity: the body is then not the bytes a check of
// its form or JSON could read.
func ContentEncoded(h *fasthttp.RequestHeader) bool {
	for k, v := range Fields(h) {
		if ascii.EqualFold(k, "Content-Encoding") {
			if v = ascii.TrimOWS(v); len(v) > 0 && !ascii.EqualFold(v, "identity") {
				return true
			}
		}
	}
	return false
}

// nextLine splits the first line off a header section: the line without
// its CRLF (or bare LF), and the rest.
func nextLine(raw []byte) (line, rest []byte) {
	end := bytes.IndexByte(raw, '\n')
	if end < 0 {
		line = raw
	} else {
		line, rest = raw[:end], raw[end+1:]
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, rest
}

// FieldList is an ordered list of header fields held in one reusable
// buffer: the forwarding step builds the upstream header section in it
// before writing it into the request. Each field is kept as the line it is
// sent as ("name: value" and CRLF), so the section goes out in one write.
// The zero value is ready to use; it allocates only while its buffers
// grow.
type FieldList struct {
	buf   []byte // the field lines, in order
	spans []fieldSpan
	// Working buffers of one forwarding step.
	chain  []byte // X-Forwarded-For values a trusted proxy sent, joined
	conn   []byte // names the client listed in Connection, each followed by ','
	uri    []byte // the upstream request target
	query  []byte // the upstream query when parameters were stripped
	method []byte
}

// fieldSpan locates a field's name (buf[ks:ke]) and value (buf[ke+2:ve])
// in its line.
type fieldSpan struct{ ks, ke, ve int }

// Reset empties l, keeping its buffers.
func (l *FieldList) Reset() {
	l.ResetKeepConn()
	l.conn = l.conn[:0]
}

// ResetKeepConn is Reset but for the client's Connection options, which a
// second pass over the same request starts from.
func (l *FieldList) ResetKeepConn() {
	l.buf, l.spans = l.buf[:0], l.spans[:0]
	l.chain, l.uri, l.query, l.method = l.chain[:0], l.uri[:0], l.query[:0], l.method[:0]
}

// CopyTo makes dst the same request target and fields as l, in dst's
// own buffers (a copy that outlives l's request: a mirror's).
func (l *FieldList) CopyTo(dst *FieldList) {
	dst.Reset()
	dst.buf = append(dst.buf, l.buf...)
	dst.spans = append(dst.spans, l.spans...)
	dst.uri = append(dst.uri, l.uri...)
}

// Add appends a field; name and value are copied.
func (l *FieldList) Add(name, value []byte) {
	ks := len(l.buf)
	l.buf = append(l.buf, name...)
	l.endField(ks, value)
}

// AddString is Add with a string name.
func (l *FieldList) AddString(name string, value []byte) {
	ks := len(l.buf)
	l.buf = append(l.buf, name...)
	l.endField(ks, value)
}

// endField completes the line whose name starts at ks.
func (l *FieldList) endField(ks int, value []byte) {
	ke := len(l.buf)
	l.buf = append(l.buf, ':', ' ')
	l.buf = append(l.buf, value...)
	l.spans = append(l.spans, fieldSpan{ks, ke, len(l.buf)})
	l.buf = append(l.buf, '\r', '\n')
}

// Len reports the number of fields.
func (l *FieldList) Len() int { return len(l.spans) }

// Field returns field i; the bytes alias l until it is reset.
func (l *FieldList) Field(i int) (name, value []byte) {
	s := l.spans[i]
	return l.buf[s.ks:s.ke], l.buf[s.ke+2 : s.ve]
}

// Get returns the value of the first field named name (ASCII case
// folded), or nil.
func (l *FieldList) Get(name string) []byte {
	for i := range l.spans {
		if k, v := l.Field(i); len(k) == len(name) && nameIs(k, name) {
			return v
		}
	}
	return nil
}

// nameIs compares a field name with a known one ignoring ASCII case and
// treating '_' as '-': CGI, WSGI, PHP and Rack fold both to the same
// variable, so "X_Consumer" reaches such a backend as X-Consumer.
// FieldNameIs reports whether header name b is s as backends read names:
// case folded, '_' read as '-' (CGI, PHP and WSGI turn both into one
// variable).
func FieldNameIs(b []byte, s string) bool { return nameIs(b, s) }

func nameIs(b []byte, s string) bool {
	return len(b) == len(s) && nameHasPrefix(b, s)
}

// nameHasPrefix is nameIs for a prefix of b.
func nameHasPrefix(b []byte, p string) bool {
	if len(b) < len(p) {
		return false
	}
	for i := 0; i < len(p); i++ {
		x, y := foldName(b[i]), foldName(p[i])
		if x != y {
			return false
		}
	}
	return true
}

func foldName(c byte) byte {
	switch {
	case c == '_':
		return '-'
	case 'A' <= c && c <= 'Z':
		return c + 'a' - 'A'
	}
	return c
}
