package source

import (
	"bytes"

	"github.com/tollgate/tollgate/internal/ascii"
)

// Bounds of the multipart/form-data scanner: a body with more parts, or a
// part with a longer header block, is not read (BadMultipart).
const (
	MaxMultipartParts = 1000
	maxPartHeader     = 8 << 10
	maxBoundary       = 70 // RFC 2046
)

// boundaryOf returns the boundary parameter of a multipart Content-Type.
func boundaryOf(ct []byte) ([]byte, bool) {
	params := ct
	for {
		i := bytes.IndexByte(params, ';')
		if i < 0 {
			return nil, false
		}
		params = ascii.TrimOWS(params[i+1:])
		if !ascii.HasPrefixFold(params, "boundary=") {
			continue
		}
		v := params[len("boundary="):]
		if len(v) > 0 && v[0] == '"' {
			end := bytes.IndexByte(v[1:], '"')
			if end < 0 {
				return nil, false
			}
			v = v[1 : 1+end]
		} else if j := bytes.IndexByte(v, ';'); j >= 0 {
			v = ascii.TrimOWS(v[:j])
		}
		return v, len(v) > 0 && len(v) <= maxBoundary
	}
}

// eachPart visits the parts of a multipart/form-data body: each part's
// field name (as a value of its own, with no name), the file name of a
// file part, and the content of a field part (one without a file name).
// File contents are not visited: an upload is stored, not parsed as
// parameters. It reads strictly — CRLF line ends, a Content-Disposition
// of form-data in every part, one name parameter, no transfer encoding
// but 7bit, 8bit or binary, the closing delimiter present — because a
// part one parser skips and another reads is a way around the check.
// stopped reports that visit returned false.
func eachPart(buf, body, boundary []byte, visit func(k Kind, name, value []byte) bool) (_ []byte, stopped bool, unread Unread) {
	var delimArr [2 + maxBoundary]byte
	delim := append(append(delimArr[:0], "--"...), boundary...)
	// The preamble before the first delimiter is ignored, by us and by
	// every parser; but a first delimiter not at the start or after a
	// CRLF (after a bare LF, which parsers also take) is refused, or the
	// parts after it would be read by the backend and taken for preamble
	// here.
	pos := bytes.Index(body, delim)
	switch {
	case pos < 0:
		return buf, false, BadMultipart
	case pos == 1 || pos >= 2 && (body[pos-2] != '\r' || body[pos-1] != '\n'):
		return buf, false, BadMultipart
	}
	for parts := 0; ; parts++ {
		pos += len(delim)
		if bytes.HasPrefix(body[pos:], []byte("--")) {
			// The close delimiter, then blanks and a CRLF or the end; the
			// epilogue is ignored. Anything else on its line makes parsers
			// read it as preamble or content and go on.
			end := pos + 2
			for end < len(body) && (body[end] == ' ' || body[end] == '\t') {
				end++
			}
			if end == len(body) || bytes.HasPrefix(body[end:], []byte("\r\n")) {
				return buf, false, ReadAll
			}
			return buf, false, BadMultipart
		}
		if parts == MaxMultipartParts {
			return buf, false, BadMultipart
		}
		for pos < len(body) && (body[pos] == ' ' || body[pos] == '\t') {
			pos++
		}
		if !bytes.HasPrefix(body[pos:], []byte("\r\n")) {
			return buf, false, BadMultipart
		}
		pos += 2
		hdrEnd := bytes.Index(body[pos:min(len(body), pos+maxPartHeader)], []byte("\r\n\r\n"))
		if hdrEnd < 0 {
			return buf, false, BadMultipart
		}
		headers := body[pos : pos+hdrEnd+2]
		content := pos + hdrEnd + 4
		// The next delimiter: after a CRLF, or right at the start of the
		// content (an empty part), which parsers take too.
		end, next := 0, content
		if !bytes.HasPrefix(body[content:], delim) {
			if end = indexDelimiter(body[content:], delim); end < 0 {
				return buf, false, BadMultipart
			}
			next = content + end + 2
		}
		p, u := readPartHeaders(headers)
		if u != ReadAll {
			return buf, false, u
		}
		// Quoted parameters are read as parsers read them, backslash
		// escapes undone: `name="<scr\ipt>"` is "<script>" to some.
		buf = appendUnquoted(buf[:0], p.name, false)
		n := len(buf)
		if !visitQuoted(Form, nil, p.name, buf[:n], visit) {
			return buf, true, ReadAll
		}
		if p.file {
			buf = appendUnquoted(buf, p.filename, false)
			if !visitQuoted(Form, buf[:n], p.filename, buf[n:], visit) {
				return buf, true, ReadAll
			}
			if len(p.filenameExt) > 0 && !visit(Form, buf[:n], p.filenameExt) {
				return buf, true, ReadAll
			}
		} else if !visit(Form, buf[:n], body[content:content+end]) {
			return buf, true, ReadAll
		}
		pos = next
	}
}

// appendUnquoted appends the content of a quoted-string with its
// backslash escapes undone: before any byte when all is set, else only
// before a tspecial (Go's mime reads `"C:\dir"` as a path, as browsers
// send it).
func appendUnquoted(dst, q []byte, all bool) []byte {
	for i := 0; i < len(q); i++ {
		if q[i] == '\\' && i+1 < len(q) && (all || bytes.IndexByte([]byte(`()<>@,;:\"/[]?=`), q[i+1]) >= 0) {
			i++
		}
		dst = append(dst, q[i])
	}
	return dst
}

// visitQuoted visits a parameter as parsers may read it: with escapes
// before tspecials undone (dec), and, when it holds a backslash, also
// raw and with every escape undone — parsers disagree, and a payload must
// not hide in the difference. The extra forms are decoded on the stack.
func visitQuoted(k Kind, name, raw, dec []byte, visit func(k Kind, name, value []byte) bool) bool {
	if !visit(k, name, dec) {
		return false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return true
	}
	var arr [256]byte
	all := appendUnquoted(arr[:0], raw, true)
	return visit(k, name, raw) && visit(k, name, all)
}

// indexDelimiter finds CRLF "--boundary" in b and returns the index of
// the CR.
func indexDelimiter(b, delim []byte) int {
	for off := 0; ; {
		i := bytes.Index(b[off:], delim)
		if i < 0 {
			return -1
		}
		i += off
		if i >= 2 && b[i-2] == '\r' && b[i-1] == '\n' {
			return i - 2
		}
		off = i + 1
	}
}

type part struct {
	name, filename []byte
	filenameExt    []byte // filename*=utf-8''…, which browsers may send too
	file           bool
}

// readPartHeaders reads the header block of one part (CRLF-terminated
// lines).
func readPartHeaders(h []byte) (p part, unread Unread) {
	disposition := false
	for len(h) > 0 {
		i := bytes.Index(h, []byte("\r\n"))
		line := h[:i]
		h = h[i+2:]
		if len(line) == 0 || line[0] == ' ' || line[0] == '\t' || bytes.IndexByte(line, '\n') >= 0 || bytes.IndexByte(line, '\r') >= 0 {
			return p, BadMultipart // an empty or folded line, or a bare LF a parser splits at
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return p, BadMultipart
		}
		name, value := line[:colon], ascii.TrimOWS(line[colon+1:])
		switch {
		case ascii.EqualFold(name, "content-disposition"):
			if disposition {
				return p, BadMultipart
			}
			disposition = true
			if !readDisposition(value, &p) {
				return p, BadMultipart
			}
		case ascii.EqualFold(name, "content-transfer-encoding"):
			if !ascii.EqualFold(value, "7bit") && !ascii.EqualFold(value, "8bit") && !ascii.EqualFold(value, "binary") {
				return p, Encoded
			}
		}
	}
	if !disposition {
		return p, BadMultipart
	}
	return p, ReadAll
}

// readDisposition reads `form-data; name="field"; filename="a.txt"`.
// A repeated parameter, or a name missing, is refused: parsers disagree
// on which one counts.
func readDisposition(v []byte, p *part) bool {
	semi := bytes.IndexByte(v, ';')
	if semi < 0 || !ascii.EqualFold(ascii.TrimOWS(v[:semi]), "form-data") {
		return false
	}
	v = v[semi+1:]
	var haveName bool
	for {
		v = ascii.TrimOWS(v)
		if len(v) == 0 {
			return haveName
		}
		eq := bytes.IndexByte(v, '=')
		if eq <= 0 {
			return false
		}
		key := ascii.TrimOWS(v[:eq])
		v = ascii.TrimOWS(v[eq+1:])
		var val []byte
		if len(v) > 0 && v[0] == '"' {
			i := 1
			for ; i < len(v) && v[i] != '"'; i++ {
				if v[i] == '\\' {
					i++
				}
			}
			if i >= len(v) {
				return false
			}
			val, v = v[1:i], v[i+1:]
		} else {
			i := bytes.IndexByte(v, ';')
			if i < 0 {
				i = len(v)
			}
			val, v = ascii.TrimOWS(v[:i]), v[i:]
		}
		switch {
		case ascii.EqualFold(key, "name"):
			if haveName {
				return false
			}
			haveName, p.name = true, val
		case ascii.EqualFold(key, "filename"):
			if p.filename != nil {
				return false
			}
			p.file, p.filename = true, val[:len(val):len(val)]
		case ascii.EqualFold(key, "filename*"):
			if p.filenameExt != nil {
				return false
			}
			p.file, p.filenameExt = true, val[:len(val):len(val)]
		}
		v = ascii.TrimOWS(v)
		if len(v) > 0 {
			if v[0] != ';' {
				return false
			}
			v = v[1:]
		}
	}
}
