package source

import (
	"bytes"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/internal/ascii"
)

// Unread says why EachValue did not read a request body whole.
type Unread uint8

const (
	ReadAll      Unread = iota // read whole, or no body
	Streamed                   // larger than stream_body_bytes: never in memory
	Encoded                    // a Content-Encoding, a charset other than UTF-8, or a part's transfer encoding
	BadJSON                    // not one valid JSON document (NaN, a BOM, UTF-16, trailing commas, single quotes…)
	TooDeep                    // JSON nested deeper than 1024
	BadMultipart               // multipart/form-data that does not read strictly (see eachPart)
	OtherMedia                 // a body of a media type with no reader (text/plain, none, XML, binary)
)

// EachValue calls visit with every value a client can put in a request for
// the backend to read as data: each path segment (decoded, name empty),
// each query parameter, each parameter of an urlencoded body, each string
// of a JSON body (its name the dotted path of object keys, array
// positions left out: "items.name"), and each field of a multipart/form-data
// body (see eachPart). Parameter names, JSON object keys and multipart
// field names are visited too, as values of their own with an empty name:
// a name is data to a backend that echoes or stores it. Names and values
// are decoded as the lookups decode them. visit returns false to stop.
// The slices are valid only during the call.
//
// The result says whether the body was read whole; a check that must see
// every value cannot vouch for a body that was not. Bodies are read only
// when in memory, a JSON body whole.
func (r *Reader) EachValue(visit func(k Kind, name, value []byte) bool) Unread {
	c := r.c
	buf, unread := r.eachValue(c.Scratch[:0], visit)
	r.keep(buf)
	return unread
}

func (r *Reader) eachValue(buf []byte, visit func(k Kind, name, value []byte) bool) ([]byte, Unread) {
	c := r.c

	// Path segments: the canonical path keeps reserved escapes; decode them
	// for the check, as a backend would.
	p := c.Target.Path
	for len(p) > 0 {
		if p[0] == '/' {
			p = p[1:]
			continue
		}
		seg := p
		if i := bytes.IndexByte(p, '/'); i >= 0 {
			seg, p = p[:i], p[i:]
		} else {
			p = nil
		}
		buf = appendPercentDecoded(buf[:0], seg)
		if !visit(Path, nil, buf) {
			return buf, ReadAll
		}
	}
	var ok bool
	if buf, ok = eachPair(buf, c.Target.Query, Query, visit); !ok {
		return buf, ReadAll
	}
	req := c.Req
	if req.IsBodyStream() {
		return buf, Streamed
	}
	data := req.Body()
	if len(data) == 0 {
		return buf, ReadAll
	}
	if codec.ContentEncoded(&req.Header) {
		return buf, Encoded
	}
	ct := req.Header.ContentType()
	media := MediaOf(ct)
	if media != MediaOther && !utf8Charset(ct) {
		return buf, Encoded
	}
	switch media {
	case MediaForm:
		buf, _ = eachPair(buf, data, Form, visit)
	case MediaJSON:
		// Every value, not the lookups' window: a check that stopped at
		// 64 KiB would be walked around with padding. The body is in
		// memory, so at most stream_body_bytes.
		w := jwalk{s: jscan{d: data}, path: c.Scratch2[:0], buf: buf}
		e := w.walk(skipWS(data, 0), 0, visit)
		buf = w.buf
		if cap(w.path) <= MaxScratch {
			c.Scratch2 = w.path[:0]
		}
		switch {
		case e == errStop:
		case e == errDeep:
			return buf, TooDeep
		case e < 0 || skipWS(data, e) != len(data):
			return buf, BadJSON
		}
	case MediaMultipart:
		boundary, ok := boundaryOf(ct)
		if !ok {
			return buf, BadMultipart
		}
		var unread Unread
		if buf, _, unread = eachPart(buf, data, boundary, visit); unread != ReadAll {
			return buf, unread
		}
	default:
		return buf, OtherMedia
	}
	return buf, ReadAll
}

// utf8Charset reports a Content-Type whose charset parameter, if any, is
// UTF-8 or US-ASCII (a subset): the only text the readers decode.
func utf8Charset(ct []byte) bool {
	for {
		i := bytes.IndexByte(ct, ';')
		if i < 0 {
			return true
		}
		ct = ascii.TrimOWS(ct[i+1:])
		if !ascii.HasPrefixFold(ct, "charset=") {
			continue
		}
		v := ct[len("charset="):]
		if j := bytes.IndexByte(v, ';'); j >= 0 {
			v = v[:j]
		}
		v = bytes.Trim(ascii.TrimOWS(v), `"`)
		return ascii.EqualFold(v, "utf-8") || ascii.EqualFold(v, "utf8") || ascii.EqualFold(v, "us-ascii")
	}
}

// eachPair visits the decoded pairs of an urlencoded string (query or
// form), split at '&' only: a value holding ';' is checked whole.
func eachPair(buf, b []byte, k Kind, visit func(k Kind, name, value []byte) bool) ([]byte, bool) {
	for len(b) > 0 {
		var key, val []byte
		if key, val, b = nextPair(b); len(key) == 0 && len(val) == 0 {
			continue
		}
		buf = appendUnescaped(buf[:0], key)
		nk := len(buf)
		buf = appendUnescaped(buf, val)
		if !visit(k, nil, buf[:nk]) || !visit(k, buf[:nk], buf[nk:]) {
			return buf, false
		}
	}
	return buf, true
}

// appendPercentDecoded decodes %XX escapes (no '+': this is a path).
func appendPercentDecoded(dst, b []byte) []byte {
	for i := 0; i < len(b); i++ {
		if b[i] == '%' && i+2 < len(b) {
			if hi, lo := ascii.Unhex(b[i+1]), ascii.Unhex(b[i+2]); hi >= 0 && lo >= 0 {
				dst = append(dst, byte(hi<<4|lo))
				i += 2
				continue
			}
		}
		dst = append(dst, b[i])
	}
	return dst
}

// jwalk visits the strings of a JSON document with their key paths.
type jwalk struct {
	s    jscan
	path []byte // keys joined by '.', up to the current value
	buf  []byte // the value being reported, unescaped
}

// walk visits the value at d[i] and returns where it ends, or < 0 on a
// syntax error or when the visitor stopped.
func (w *jwalk) walk(i, depth int, visit func(k Kind, name, value []byte) bool) int {
	d := w.s.d
	if depth > maxJSONNesting {
		return errDeep
	}
	if i >= len(d) {
		return errEOF
	}
	switch d[i] {
	case '{':
		i = skipWS(d, i+1)
		if i < len(d) && d[i] == '}' {
			return i + 1
		}
		for {
			if i >= len(d) || d[i] != '"' {
				return errSyntax
			}
			end := w.s.str(i)
			if end < 0 {
				return end
			}
			mark := len(w.path)
			if mark > 0 {
				w.path = append(w.path, '.')
			}
			keyAt := len(w.path)
			w.path = appendJSONUnescaped(w.path, d[i+1:end-1])
			if !visit(JSON, nil, w.path[keyAt:]) {
				return errStop
			}
			i = skipWS(d, end)
			if i >= len(d) || d[i] != ':' {
				return errSyntax
			}
			i = w.walk(skipWS(d, i+1), depth+1, visit)
			w.path = w.path[:mark]
			if i < 0 {
				return i
			}
			i = skipWS(d, i)
			if i >= len(d) {
				return errEOF
			}
			if d[i] == '}' {
				return i + 1
			}
			if d[i] != ',' {
				return errSyntax
			}
			i = skipWS(d, i+1)
		}
	case '[':
		i = skipWS(d, i+1)
		if i < len(d) && d[i] == ']' {
			return i + 1
		}
		for {
			if i = w.walk(i, depth+1, visit); i < 0 {
				return i
			}
			i = skipWS(d, i)
			if i >= len(d) {
				return errEOF
			}
			if d[i] == ']' {
				return i + 1
			}
			if d[i] != ',' {
				return errSyntax
			}
			i = skipWS(d, i+1)
		}
	case '"':
		end := w.s.str(i)
		if end < 0 {
			return end
		}
		w.buf = appendJSONUnescaped(w.buf[:0], d[i+1:end-1])
		if !visit(JSON, w.path, w.buf) {
			return errStop
		}
		return end
	}
	return w.s.skip(i)
}
