package source

import (
	"bytes"

	"github.com/tollgate/tollgate/internal/ascii"
)

// EachValue calls visit with every value a client can put in a request for
// the backend to read as data: each path segment (decoded, name empty),
// each query parameter, each parameter of an urlencoded body, and each
// string of a JSON body (its name the dotted path of object keys, array
// positions left out: "items.name"). Names and values are decoded as the
// lookups decode them. visit returns false to stop. The slices are valid
// only during the call. Bodies are read only when in memory (see
// BodyHidden), a JSON body whole.
func (r *Reader) EachValue(visit func(k Kind, name, value []byte) bool) {
	c := r.c
	buf := r.eachValue(c.Scratch[:0], visit)
	r.keep(buf)
}

func (r *Reader) eachValue(buf []byte, visit func(k Kind, name, value []byte) bool) []byte {
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
			return buf
		}
	}
	var ok bool
	if buf, ok = eachPair(buf, c.Target.Query, Query, visit); !ok {
		return buf
	}
	switch r.bodyOf() {
	case bodyForm:
		buf, _ = eachPair(buf, r.data, Form, visit)
	case bodyJSON:
		// Every value, not the lookups' window: a check that stopped at
		// 64 KiB would be walked around with padding. The body is in
		// memory, so at most stream_body_bytes.
		data := c.Req.Body()
		w := jwalk{s: jscan{d: data}, path: c.Scratch2[:0], buf: buf}
		w.walk(skipWS(data, 0), 0, visit)
		buf = w.buf
		if cap(w.path) <= MaxScratch {
			c.Scratch2 = w.path[:0]
		}
	}
	return buf
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
		if !visit(k, buf[:nk], buf[nk:]) {
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
	if i >= len(d) || depth > maxJSONNesting {
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
			w.path = appendJSONUnescaped(w.path, d[i+1:end-1])
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
			return errSyntax // stops the walk
		}
		return end
	}
	return w.s.skip(i)
}
