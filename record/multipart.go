package record

import (
	"bytes"

	"github.com/tollgate/tollgate/internal/ascii"
)

// A multipart body is kept part by part: each part's header fields as
// header fields are (a secret's masked), and its content masked whole when
// its field name names a secret (name="password"), as JSON when it is JSON,
// as a form when it is urlencoded, byte for byte otherwise. A body that
// does not read as multipart is not kept: a secret could sit where the
// reading stopped.

// boundaryOf returns the boundary parameter of a multipart Content-Type.
func boundaryOf(ct []byte) []byte {
	_, params, _ := bytes.Cut(ct, []byte(";"))
	for len(params) > 0 {
		var p []byte
		p, params = cutParam(params)
		k, v, ok := bytes.Cut(ascii.TrimOWS(p), []byte("="))
		if !ok || !ascii.EqualFold(ascii.TrimOWS(k), "boundary") {
			continue
		}
		v = ascii.TrimOWS(v)
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		if len(v) == 0 || len(v) > 70 {
			return nil // RFC 2046: 1 to 70 characters
		}
		return v
	}
	return nil
}

// nextDelimiter finds the next delimiter line ("--" boundary at the start
// of a line) in body at or after from; -1 when there is none.
func nextDelimiter(body []byte, from int, boundary []byte) int {
	for i := from; i+2+len(boundary) <= len(body); {
		k := bytes.Index(body[i:], boundary)
		if k < 0 {
			return -1
		}
		at := i + k - 2
		if at >= 0 && body[at] == '-' && body[at+1] == '-' && (at == 0 || body[at-1] == '\n') {
			return at
		}
		i += k + 1
	}
	return -1
}

// appendMultipart appends body, a multipart body with the given boundary,
// masked. cut says body is the start of a longer one. ok is false when it
// does not read as multipart; then what was appended must be dropped.
func (e *entry) appendMultipart(dst, body, boundary []byte, cut bool, m *masks) (out []byte, ok bool) {
	d := nextDelimiter(body, 0, boundary)
	if d < 0 {
		// Cut before the first delimiter, the body kept is preamble
		// (or the start of the delimiter), which no reader reads.
		return append(dst, body...), cut
	}
	dst = append(dst, body[:d]...) // the preamble, which no reader reads
	for {
		after := d + 2 + len(boundary)
		if bytes.HasPrefix(body[after:], []byte("--")) {
			return append(dst, body[d:]...), true // the close, and the epilogue
		}
		eol := bytes.IndexByte(body[after:], '\n')
		if eol < 0 {
			return append(dst, body[d:]...), cut
		}
		headStart := after + eol + 1
		headEnd, contentStart := partHeaderEnd(body, headStart)
		if headEnd < 0 {
			// The part's header is cut short: it is left out, with its
			// content, of which nothing was kept.
			return dst, cut
		}
		dst = append(dst, body[d:headStart]...)
		name, ct := e.appendPartHeader(&dst, body[headStart:headEnd], m)
		dst = append(dst, body[headEnd:contentStart]...)
		next := nextDelimiter(body, contentStart, boundary)
		contentEnd := next
		switch {
		case next < 0 && !cut:
			return dst, false
		case next < 0:
			contentEnd = len(body)
		case next >= contentStart+2 && body[next-2] == '\r':
			contentEnd = next - 2
		case next >= contentStart+1:
			contentEnd = next - 1
		}
		content := body[contentStart:contentEnd]
		var whole bool
		switch kind := kindOf(ct); {
		case name != nil && m.form.Match(name):
			e.sec.add(content)
			dst, whole = append(dst, Masked...), true
		case kind == multipartBody:
			whole = false // parts within a part: not looked into
		case kind == jsonBody || kind == plainBody && looksJSON(content):
			dst, e.spans, whole = m.appendJSON(dst, content, next < 0, e.spans, &e.sec)
		case kind == formBody:
			dst, e.scratch = appendParams(dst, content, m.form, &e.sec, e.scratch)
			whole = true
		default:
			dst, whole = append(dst, content...), true
		}
		if !whole {
			return dst, false
		}
		if next < 0 {
			return dst, true
		}
		dst = append(dst, body[contentEnd:next]...)
		d = next
	}
}

// partHeaderEnd finds the blank line that ends a part's header at start:
// headEnd is where the blank line starts, contentStart past it; -1 when
// there is none.
func partHeaderEnd(body []byte, start int) (headEnd, contentStart int) {
	if bytes.HasPrefix(body[start:], []byte("\r\n")) {
		return start, start + 2
	}
	if bytes.HasPrefix(body[start:], []byte("\n")) {
		return start, start + 1
	}
	for i := start; ; {
		k := bytes.IndexByte(body[i:], '\n')
		if k < 0 {
			return -1, -1
		}
		nl := i + k
		switch {
		case bytes.HasPrefix(body[nl+1:], []byte("\r\n")):
			return nl + 1, nl + 3
		case bytes.HasPrefix(body[nl+1:], []byte("\n")):
			return nl + 1, nl + 2
		}
		i = nl + 1
	}
}

// appendPartHeader appends a part's header lines, a secret's value masked,
// and returns the part's field name and Content-Type.
func (e *entry) appendPartHeader(dst *[]byte, head []byte, m *masks) (name, ct []byte) {
	for len(head) > 0 {
		line := head
		if i := bytes.IndexByte(head, '\n'); i >= 0 {
			line, head = head[:i+1], head[i+1:]
		} else {
			head = nil
		}
		body := bytes.TrimRight(line, "\r\n")
		eol := line[len(body):]
		k, v, ok := bytes.Cut(body, []byte(":"))
		switch {
		case !ok:
		case m.header(k):
			*dst = append(append(*dst, k...), ':')
			*dst = appendHeaderValue(*dst, k, ascii.TrimOWS(v), &e.sec)
			*dst = append(*dst, eol...)
			continue
		case ascii.EqualFold(ascii.TrimOWS(k), "Content-Disposition"):
			name = dispositionName(v)
		case ascii.EqualFold(ascii.TrimOWS(k), "Content-Type"):
			ct = ascii.TrimOWS(v)
		}
		*dst = append(*dst, line...)
	}
	return name, ct
}

// dispositionName returns the name parameter of a Content-Disposition
// value (form-data; name="password"), unquoted; name* (RFC 5987) counts
// too, its charset and language dropped.
func dispositionName(v []byte) []byte {
	_, params, _ := bytes.Cut(v, []byte(";"))
	for len(params) > 0 {
		var p []byte
		p, params = cutParam(params)
		k, val, ok := bytes.Cut(ascii.TrimOWS(p), []byte("="))
		if !ok {
			continue
		}
		k, val = ascii.TrimOWS(k), ascii.TrimOWS(val)
		switch {
		case ascii.EqualFold(k, "name"):
			if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
				val = val[1 : len(val)-1]
			}
			return val
		case ascii.EqualFold(k, "name*"):
			if i := bytes.LastIndexByte(val, '\''); i >= 0 {
				val = val[i+1:]
			}
			return val
		}
	}
	return nil
}

// cutParam cuts the first ';'-separated parameter off params, a ';'
// inside a quoted value included in it.
func cutParam(params []byte) (param, rest []byte) {
	quoted := false
	for i, c := range params {
		switch {
		case c == '"':
			quoted = !quoted
		case c == ';' && !quoted:
			return params[:i], params[i+1:]
		}
	}
	return params, nil
}
