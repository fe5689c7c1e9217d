package waf

import (
	"bytes"
	"encoding/json"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/internal/ascii"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/source"
)

// What the WAF does with a request body, by its media type. A body it
// cannot read completely is no body it can vouch for: at level block it
// is refused, as OWASP CRS refuses a body its parser fails on
// (REQBODY_ERROR), and counted by reason.
//
//   - urlencoded form and JSON: every value and every name (a JSON key is
//     checked as its dotted path). A JSON body must be valid JSON (RFC 8259:
//     no NaN, no byte order mark, no UTF-16, no trailing commas or single
//     quotes) and nest at most 1,024 deep, as far as the value walk reads.
//   - multipart/form-data: each part's field name, file name and, for a
//     part that is not a file, its value. A body that does not parse as
//     multipart is refused.
//   - any other media type, or none: the whole body, as one value; a
//     route that lists `bodies` refuses any other type with 415.
//   - a body the WAF cannot see at all (streamed past stream_body_bytes,
//     or content-encoded): 413, as before.

// Reasons a body was refused unread, counted apart.
const (
	reasonJSON      = iota // not valid JSON
	reasonDepth            // JSON nested deeper than the walk reads
	reasonMultipart        // not parseable as multipart/form-data
	reasonMedia            // a media type the route does not accept
	reasons
)

var reasonNames = [reasons]string{"unreadable_json", "too_deep", "unreadable_multipart", "media_type"}

var (
	blockUnreadable = [reasons]*pipeline.Canned{
		pipeline.NewCanned(400, "request body is not valid JSON; the WAF cannot inspect it"),
		pipeline.NewCanned(400, "request body nests deeper than the WAF inspects (1024 levels)"),
		pipeline.NewCanned(400, "request body is not valid multipart/form-data; the WAF cannot inspect it"),
		pipeline.NewCanned(415, "request body media type is not accepted on this route"),
	}
	logUnreadable = [reasons]string{
		"waf: body not valid JSON (logged)", "waf: body nested too deep (logged)",
		"waf: body not valid multipart (logged)", "waf: body media type not accepted (logged)",
	}
)

// bodyKind is what the WAF reads a body as.
type bodyKind uint8

const (
	bodyEmpty bodyKind = iota
	bodyForm
	bodyJSON
	bodyMultipart
	bodyOther
)

// bodyKindOf classifies c's body; a body with no bytes is empty whatever
// its type.
func bodyKindOf(c *pipeline.Ctx) bodyKind {
	if !c.Req.IsBodyStream() && len(c.Req.Body()) == 0 {
		return bodyEmpty
	}
	ct := c.Req.Header.ContentType()
	switch source.MediaOf(ct) {
	case source.MediaForm:
		return bodyForm
	case source.MediaJSON:
		return bodyJSON
	}
	if mediaIs(ct, "multipart/form-data") {
		return bodyMultipart
	}
	return bodyOther
}

// mediaIs reports whether the Content-Type ct is of media type mt
// (lower-case), parameters aside.
func mediaIs(ct []byte, mt string) bool {
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = ascii.TrimOWS(ct)
	return len(ct) == len(mt) && ascii.HasPrefixFold(ct, mt)
}

// unreadable returns the reason a body in memory cannot be inspected
// completely, or -1.
func (w *WAF) unreadable(c *pipeline.Ctx, kind bodyKind) int {
	body := c.Req.Body()
	switch kind {
	case bodyJSON:
		if !json.Valid(body) {
			return reasonJSON
		}
		if jsonDepth(body) > maxJSONDepth {
			return reasonDepth
		}
	case bodyMultipart:
		if !eachPart(body, multipartBoundary(c.Req.Header.ContentType()), func(_, _, _ []byte, _ bool) bool { return true }) {
			return reasonMultipart
		}
	case bodyOther:
		if w.bodies != nil && !w.acceptsMedia(c.Req.Header.ContentType()) {
			return reasonMedia
		}
	}
	return -1
}

// maxJSONDepth is the nesting the value walk reads to (source's limit).
const maxJSONDepth = 1024

// jsonDepth is the deepest nesting of a valid JSON text.
func jsonDepth(b []byte) int {
	depth, deepest := 0, 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '[', '{':
			depth++
			deepest = max(deepest, depth)
		case ']', '}':
			depth--
		}
	}
	return deepest
}

// eachJSONKey visits every object key of a valid JSON text, unescaped:
// the value walk names only the keys on the way to a string, so a key
// over a number, a boolean or an object would not be seen.
func eachJSONKey(b []byte, visit func(key []byte) bool) {
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			continue
		}
		start := i + 1
		escaped := false
		for i++; i < len(b) && b[i] != '"'; i++ {
			if b[i] == '\\' {
				escaped = true
				i++
			}
		}
		if i >= len(b) {
			return
		}
		key := b[start:i]
		j := i + 1
		for j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\n' || b[j] == '\r') {
			j++
		}
		if j >= len(b) || b[j] != ':' {
			continue // a string value
		}
		if escaped {
			// Rare: decoded by the standard library, which allocates.
			var s string
			if json.Unmarshal(b[start-1:i+1], &s) != nil {
				continue
			}
			key = []byte(s)
		}
		if !visit(key) {
			return
		}
	}
}

// acceptsMedia reports a Content-Type among the route's bodies.
func (w *WAF) acceptsMedia(ct []byte) bool {
	for _, mt := range w.bodies {
		if mediaIs(ct, mt) {
			return true
		}
	}
	return false
}

// multipartBoundary is the boundary parameter of a multipart Content-Type
// (quoted or not), nil when there is none.
func multipartBoundary(ct []byte) []byte {
	for params := ct; ; {
		i := bytes.IndexByte(params, ';')
		if i < 0 {
			return nil
		}
		params = params[i+1:]
		p := ascii.TrimOWS(params)
		if j := bytes.IndexByte(p, ';'); j >= 0 {
			p = ascii.TrimOWS(p[:j])
		}
		if ascii.HasPrefixFold(p, "boundary=") {
			v := p[len("boundary="):]
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			if len(v) == 0 || len(v) > 70 {
				return nil
			}
			return v
		}
	}
}

// eachPart walks a multipart/form-data body (RFC 7578): for each part, the
// field name and file name of its Content-Disposition and its content,
// file says a part that carries a file. It reports false for a body that
// does not parse: no boundary, no first delimiter, a part without its
// header section's end, a part never closed.
func eachPart(body, boundary []byte, visit func(name, filename, content []byte, file bool) bool) bool {
	if len(boundary) == 0 {
		return false
	}
	var delim [76]byte // "--" + boundary (at most 70) + room
	d := append(append(delim[:0], '-', '-'), boundary...)
	i := bytes.Index(body, d)
	if i < 0 {
		return false
	}
	rest := body[i+len(d):]
	for {
		if bytes.HasPrefix(rest, []byte("--")) {
			return true // the close delimiter
		}
		// The delimiter line ends with CRLF (or LF), perhaps after spaces.
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 {
			return false
		}
		rest = rest[nl+1:]
		end := bytes.Index(rest, []byte("\r\n\r\n"))
		sep := 4
		if lf := bytes.Index(rest, []byte("\n\n")); lf >= 0 && (end < 0 || lf < end) {
			end, sep = lf, 2
		}
		if end < 0 {
			return false
		}
		head := rest[:end]
		rest = rest[end+sep:]
		next := bytes.Index(rest, d)
		if next < 0 {
			return false
		}
		content := rest[:next]
		content = bytes.TrimSuffix(content, []byte("\n"))
		content = bytes.TrimSuffix(content, []byte("\r"))
		rest = rest[next+len(d):]
		name, filename, file := disposition(head)
		if !visit(name, filename, content, file) {
			return true
		}
	}
}

// disposition reads a part's header section for its Content-Disposition
// name and filename.
func disposition(head []byte) (name, filename []byte, file bool) {
	for len(head) > 0 {
		line := head
		if i := bytes.IndexByte(head, '\n'); i >= 0 {
			line, head = head[:i], head[i+1:]
		} else {
			head = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if !ascii.HasPrefixFold(line, "content-disposition:") {
			continue
		}
		params := line[len("content-disposition:"):]
		for len(params) > 0 {
			p := params
			if i := bytes.IndexByte(params, ';'); i >= 0 {
				p, params = params[:i], params[i+1:]
			} else {
				params = nil
			}
			p = ascii.TrimOWS(p)
			eq := bytes.IndexByte(p, '=')
			if eq < 0 {
				continue
			}
			key, v := ascii.TrimOWS(p[:eq]), ascii.TrimOWS(p[eq+1:])
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			switch {
			case ascii.EqualFold(key, "name"), ascii.EqualFold(key, "name*"):
				name = v
			case ascii.EqualFold(key, "filename"), ascii.EqualFold(key, "filename*"):
				filename, file = v, true
			}
		}
	}
	return name, filename, file
}

// encoded reports a body a backend would decode before reading it.
func encoded(c *pipeline.Ctx) bool { return codec.ContentEncoded(&c.Req.Header) }
