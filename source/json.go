package source

import (
	"bytes"
	"encoding/binary"

	"unicode/utf16"
	"unicode/utf8"

	"github.com/tollgate/tollgate/internal/ascii"
)

// The JSON scanner walks a document in place, without building anything:
// it checks the syntax of every byte it passes over and finds the raw extent
// of the value at a path. Positions are indexes into the document; negative
// results are the errors below.
const (
	errSyntax = -1 // not valid JSON
	errEOF    = -2 // the data ended inside a value
	errDeep   = -3 // nested deeper than maxJSONNesting
	errStop   = -4 // a visitor stopped the walk
)

// json returns the value at path in the request's JSON body: a string's
// decoded text (in c.Scratch when it had escapes), a scalar's literal text,
// or container for an object or array.
func (r *Reader) json(path []Segment) ([]byte, Found) {
	s := jscan{d: r.data, cut: r.cut}
	start, end := s.lookup(path)
	if start < 0 {
		return nil, Absent
	}
	d := s.d
	switch d[start] {
	case '{', '[':
		return nil, Container
	case '"':
		raw := d[start+1 : end-1]
		if bytes.IndexByte(raw, '\\') < 0 {
			return raw, Scalar
		}
		buf := appendJSONUnescaped(r.buffer(len(raw)), raw)
		r.keep(buf)
		return buf, Scalar
	}
	return d[start:end], Scalar
}

type jscan struct {
	d   []byte
	cut bool // d is a prefix of a longer document
}

// lookup returns the extent [start, end) of the value at path, or start < 0
// when the document is not valid JSON or has no such value.
//
// Each container on the way is scanned to its end, so that the last of
// duplicate keys wins and a syntax error anywhere in the document (within the
// window) makes every value absent. When the window cuts the document, what
// was seen before the cut counts: a value is found if it ends inside the
// window, even when the containers around it do not.
func (s *jscan) lookup(path []Segment) (start, end int) {
	d := s.d
	i := skipWS(d, 0)
	for depth, sg := range path {
		if i >= len(d) {
			return -1, 0
		}
		var v, e int
		switch d[i] {
		case '{':
			v, e = s.member(i, sg.Key)
		case '[':
			if sg.Index < 0 {
				return -1, 0
			}
			v, e = s.element(i, sg.Index)
		default:
			return -1, 0
		}
		switch {
		case e == errEOF:
			if !s.cut {
				return -1, 0
			}
		case e < 0:
			return -1, 0
		case depth == 0 && skipWS(d, e) != len(d):
			return -1, 0 // bytes after the document
		}
		if v < 0 {
			return -1, 0
		}
		i = v
	}
	if len(path) == 0 {
		return -1, 0
	}
	e := s.skip(i)
	if e < 0 {
		return -1, 0
	}
	return i, e
}

// member scans the object at d[i] == '{' to its end and returns where the
// value of the last member named key starts (-1 if none) and where the
// object ends (or an error). On errEOF, v is the last match seen, which may
// itself be cut: the caller looks inside it or checks that it is whole.
func (s *jscan) member(i int, key string) (v, end int) {
	d := s.d
	v = -1
	i = skipWS(d, i+1)
	if i < len(d) && d[i] == '}' {
		return v, i + 1
	}
	for {
		if i >= len(d) {
			return v, errEOF
		}
		if d[i] != '"' {
			return -1, errSyntax
		}
		ks := i
		i = s.str(i)
		if i < 0 {
			return v, i
		}
		match := jsonKeyIs(d[ks+1:i-1], key)
		i = skipWS(d, i)
		if i >= len(d) {
			return v, errEOF
		}
		if d[i] != ':' {
			return -1, errSyntax
		}
		vs := skipWS(d, i+1)
		if match {
			v = vs
		}
		if i = s.skip(vs); i < 0 {
			return v, i
		}
		i = skipWS(d, i)
		if i >= len(d) {
			return v, errEOF
		}
		switch d[i] {
		case ',':
			i = skipWS(d, i+1)
		case '}':
			return v, i + 1
		default:
			return -1, errSyntax
		}
	}
}

// element scans the array at d[i] == '[' to its end and returns where its
// element number idx starts (-1 if none) and where the array ends (or an
// error).
func (s *jscan) element(i, idx int) (v, end int) {
	d := s.d
	v = -1
	i = skipWS(d, i+1)
	if i < len(d) && d[i] == ']' {
		return v, i + 1
	}
	for n := 0; ; n++ {
		if n == idx {
			v = i
		}
		if i = s.skip(i); i < 0 {
			return v, i
		}
		i = skipWS(d, i)
		if i >= len(d) {
			return v, errEOF
		}
		switch d[i] {
		case ',':
			i = skipWS(d, i+1)
		case ']':
			return v, i + 1
		default:
			return -1, errSyntax
		}
	}
}

// skipWS returns the index of the first non-whitespace byte at or after i.
func skipWS(d []byte, i int) int {
	for ; i < len(d); i++ {
		if c := d[i]; c > ' ' || (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
			return i
		}
	}
	return i
}

// Scanner states for skip.
const (
	wantValue = iota
	wantKey
	afterValue
)

// skip checks the value starting at d[i] and returns where it ends. It
// keeps no stack of its own beyond a bit per open container, and gives up
// (errSyntax) on documents nested more than maxJSONNesting deep.
func (s *jscan) skip(i int) int {
	d := s.d
	var objs [maxJSONNesting / 64]uint64 // bit set: the open container is an object
	depth := 0
	state := wantValue
	for {
		i = skipWS(d, i)
		if i >= len(d) {
			return errEOF
		}
		c := d[i]
		switch state {
		case wantKey:
			if c != '"' {
				return errSyntax
			}
			if i = s.str(i); i < 0 {
				return i
			}
			if i = skipWS(d, i); i >= len(d) {
				return errEOF
			}
			if d[i] != ':' {
				return errSyntax
			}
			i++
			state = wantValue
		case wantValue:
			if c == '{' || c == '[' {
				if depth == maxJSONNesting {
					return errSyntax
				}
				if c == '{' {
					objs[depth>>6] |= 1 << (depth & 63)
				} else {
					objs[depth>>6] &^= 1 << (depth & 63)
				}
				depth++
				if i = skipWS(d, i+1); i >= len(d) {
					return errEOF
				}
				switch {
				case c == '{' && d[i] == '}', c == '[' && d[i] == ']':
					depth--
					i++
					state = afterValue
				case c == '{':
					state = wantKey
				}
				break
			}
			switch {
			case c == '"':
				i = s.str(i)
			case c == '-' || isDigit(c):
				i = s.num(i)
			case c == 't':
				i = s.lit(i, "true")
			case c == 'f':
				i = s.lit(i, "false")
			case c == 'n':
				i = s.lit(i, "null")
			default:
				return errSyntax
			}
			if i < 0 {
				return i
			}
			state = afterValue
		case afterValue:
			if depth == 0 {
				return i
			}
			obj := objs[(depth-1)>>6]&(1<<((depth-1)&63)) != 0
			switch {
			case c == ',':
				i++
				if obj {
					state = wantKey
				} else {
					state = wantValue
				}
			case c == '}' && obj, c == ']' && !obj:
				depth--
				i++
			default:
				return errSyntax
			}
		}
		if state == afterValue && depth == 0 {
			return i
		}
	}
}

// str checks the string starting at d[i] == '"' and returns where it ends.
func (s *jscan) str(i int) int {
	d := s.d
	for i++; i < len(d); i++ {
		// Long plain runs (a text field, a padded value) are skipped eight
		// bytes at a time.
		for i+8 <= len(d) && !hasStrSpecial(binary.LittleEndian.Uint64(d[i:])) {
			i += 8
		}
		if i >= len(d) {
			break
		}
		c := d[i]
		if !strSpecial[c] {
			continue
		}
		switch {
		case c == '"':
			return i + 1
		case c == '\\':
			i++
			if i >= len(d) {
				return errEOF
			}
			switch d[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for k := 1; k <= 4; k++ {
					if i+k >= len(d) {
						return errEOF
					}
					if ascii.Unhex(d[i+k]) < 0 {
						return errSyntax
					}
				}
				i += 4
			default:
				return errSyntax
			}
		default: // a control character
			return errSyntax
		}
	}
	return errEOF
}

// hasStrSpecial reports whether any of the eight bytes of x is a quote, a
// backslash or a control character (the classic bit tricks: a byte below
// 0x20, or one that XORs to zero with '"' or '\\'); exact, so a word
// without one can be skipped whole.
func hasStrSpecial(x uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	below := (x - lo*0x20) & ^x & hi
	quote := x ^ (lo * '"')
	slash := x ^ (lo * '\\')
	return below|(quote-lo)&^quote&hi|(slash-lo)&^slash&hi != 0
}

// strSpecial marks the bytes that end the plain run of a JSON string: the
// quote, the backslash and the control characters.
var strSpecial = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// num checks the number starting at d[i] and returns where it ends. A
// number running into the end of the data is incomplete: the document it is
// in (an object or array) cannot end there.
func (s *jscan) num(i int) int {
	d := s.d
	if d[i] == '-' {
		i++
	}
	if i >= len(d) {
		return errEOF
	}
	switch c := d[i]; {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		for i++; i < len(d) && isDigit(d[i]); i++ {
		}
	default:
		return errSyntax
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) {
			return errEOF
		}
		if !isDigit(d[i]) {
			return errSyntax
		}
		for i++; i < len(d) && isDigit(d[i]); i++ {
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) {
			return errEOF
		}
		if !isDigit(d[i]) {
			return errSyntax
		}
		for i++; i < len(d) && isDigit(d[i]); i++ {
		}
	}
	if i >= len(d) {
		return errEOF
	}
	return i
}

func (s *jscan) lit(i int, word string) int {
	d := s.d
	for k := 0; k < len(word); k++ {
		if i+k >= len(d) {
			return errEOF
		}
		if d[i+k] != word[k] {
			return errSyntax
		}
	}
	return i + len(word)
}

// jsonKeyIs reports whether the raw content of a (checked) JSON string
// decodes to key, decoding escapes as it compares.
func jsonKeyIs(raw []byte, key string) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == key
	}
	return jsonKeyMatch(raw, key)
}

// jsonKeyMatch compares the decoded raw content of a JSON string with key,
// byte by byte.
func jsonKeyMatch(raw []byte, key string) bool {
	same := func(a, b byte) bool { return a == b }
	var buf [utf8.UTFMax]byte
	j := 0
	for i := 0; i < len(raw); {
		dec := raw[i : i+1]
		if raw[i] == '\\' {
			r, n := jsonEscape(raw, i)
			dec = buf[:utf8.EncodeRune(buf[:], r)]
			i += n
		} else {
			i++
		}
		if len(key)-j < len(dec) {
			return false
		}
		for _, c := range dec {
			if !same(key[j], c) {
				return false
			}
			j++
		}
	}
	return j == len(key)
}

// appendJSONUnescaped appends the decoded text of the raw content of a
// (checked) JSON string to dst.
func appendJSONUnescaped(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		k := bytes.IndexByte(raw[i:], '\\')
		if k < 0 {
			return append(dst, raw[i:]...)
		}
		dst = append(dst, raw[i:i+k]...)
		i += k
		r, n := jsonEscape(raw, i)
		i += n
		dst = utf8.AppendRune(dst, r)
	}
	return dst
}

// jsonEscape decodes the (checked) escape sequence at raw[i] == '\\' and
// returns its rune and length. Like encoding/json, a \u surrogate that is not
// followed by its pair decodes to U+FFFD and the next escape stands alone.
func jsonEscape(raw []byte, i int) (rune, int) {
	switch raw[i+1] {
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r := hexRune(raw[i+2 : i+6])
		if !utf16.IsSurrogate(r) {
			return r, 6
		}
		if i+12 <= len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
			if dec := utf16.DecodeRune(r, hexRune(raw[i+8:i+12])); dec != utf8.RuneError {
				return dec, 12
			}
		}
		return utf8.RuneError, 6
	}
	return rune(raw[i+1]), 2 // \" \\ \/
}

func hexRune(b []byte) rune {
	var r rune
	for _, c := range b {
		r = r<<4 | rune(ascii.Unhex(c))
	}
	return r
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
