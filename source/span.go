package source

import (
	"bytes"
	"math/bits"

	"github.com/tollgate/tollgate/internal/secretname"
)

// Where values lie, rather than what they are: recording masks a value by
// replacing its bytes, so it needs each value's extent in the raw request,
// found with the same rules the lookups use.

// MaxSpanPaths bounds the paths one JSONSpans call follows.
const MaxSpanPaths = 64

// JSONSpans appends to dst the extent [start, end) in doc of every value
// that paths or names designate: the value at each path (every one of
// them when a key repeats, where a lookup sees only the last), and the
// value of every object member whose key names matches (see package
// secretname: "newPassword" and "new_password" alike), at any depth; names
// may be nil.
// A designated value is reported whole and not looked into. Paths beyond
// MaxSpanPaths are ignored.
//
// cut says that doc is only the start of a longer document: running into
// its end is then no error, and a designated value the end cuts short is
// reported up to the end.
//
// whole is false when doc is not one valid JSON document (or, cut, not the
// start of one), nested at most 1024 deep: the spans found before the
// error are appended, but the rest of doc was not looked at, so a caller
// that must not let a designated value through cannot trust it. It
// allocates nothing beyond dst's growth.
func JSONSpans(dst [][2]int, doc []byte, cut bool, paths [][]Segment, names *secretname.Set) (out [][2]int, whole bool) {
	w := spanWalk{s: jscan{d: doc, cut: cut}, paths: paths, names: names, dst: dst}
	if len(w.paths) > MaxSpanPaths {
		w.paths = w.paths[:MaxSpanPaths]
	}
	var active uint64
	for i, p := range w.paths {
		if len(p) > 0 {
			active |= 1 << i
		}
	}
	i := skipWS(doc, 0)
	if i >= len(doc) {
		return w.dst, cut
	}
	if doc[i] != '{' && doc[i] != '[' {
		// A bare scalar has no members to designate. A number that runs to
		// the very end reads as cut short to the scanner: it is whole when
		// it ends in a digit, as every complete number does.
		e := w.s.skip(i)
		return w.dst, e >= 0 && skipWS(doc, e) == len(doc) || e == errEOF && (cut ||
			(doc[i] == '-' || isDigit(doc[i])) && isDigit(doc[len(doc)-1]))
	}
	e := w.value(i, 0, active)
	return w.dst, e >= 0 && skipWS(doc, e) == len(doc) || cut && e == errEOF
}

// ParamNameIs reports whether the urlencoded parameter name enc decodes to
// name ('+' a space, %XX its byte), as query and form lookups compare
// names.
func ParamNameIs(enc []byte, name string) bool { return formKeyIs(enc, name) }

// spanWalk follows paths and names through a document.
type spanWalk struct {
	s     jscan
	paths [][]Segment
	names *secretname.Set
	dst   [][2]int
}

// value walks the value at d[i], where depth keys lead and active is the
// set of paths whose first depth segments matched them; it returns where
// the value ends, or an error (< 0).
func (w *spanWalk) value(i, depth int, active uint64) int {
	d := w.s.d
	if depth > maxJSONNesting {
		return errSyntax
	}
	if i >= len(d) {
		return errEOF
	}
	if active == 0 && w.names == nil || d[i] != '{' && d[i] != '[' {
		return w.s.skip(i)
	}
	if d[i] == '{' {
		i = skipWS(d, i+1)
		if i < len(d) && d[i] == '}' {
			return i + 1
		}
		for {
			if i >= len(d) {
				return errEOF
			}
			if d[i] != '"' {
				return errSyntax
			}
			ks := i
			if i = w.s.str(i); i < 0 {
				return i
			}
			key := d[ks+1 : i-1]
			if i = skipWS(d, i); i >= len(d) {
				return errEOF
			}
			if d[i] != ':' {
				return errSyntax
			}
			vs := skipWS(d, i+1)
			next, hit := w.step(active, depth, func(sg Segment) bool { return jsonKeyIs(key, sg.Key) })
			if !hit && w.names != nil {
				hit = nameMatches(w.names, key)
			}
			if i = w.member(vs, depth, next, hit); i < 0 {
				return i
			}
			var done bool
			if i, done = afterMember(d, i, '}'); done {
				return i
			}
		}
	}
	i = skipWS(d, i+1)
	if i < len(d) && d[i] == ']' {
		return i + 1
	}
	for k := 0; ; k++ {
		next, hit := w.step(active, depth, func(sg Segment) bool { return sg.Index == k })
		if i = w.member(i, depth, next, hit); i < 0 {
			return i
		}
		var done bool
		if i, done = afterMember(d, i, ']'); done {
			return i
		}
	}
}

// afterMember reads what follows a member of an object or array: a comma
// (the next member starts at i), or the closing byte (done, i past it).
func afterMember(d []byte, i int, closing byte) (int, bool) {
	if i = skipWS(d, i); i >= len(d) {
		return errEOF, true
	}
	switch d[i] {
	case ',':
		return skipWS(d, i+1), false
	case closing:
		return i + 1, true
	}
	return errSyntax, true
}

// step matches the active paths' segment at depth: next are the paths
// that go on below, hit reports one that ends here.
func (w *spanWalk) step(active uint64, depth int, match func(Segment) bool) (next uint64, hit bool) {
	for a := active; a != 0; a &= a - 1 {
		p := w.paths[bits.TrailingZeros64(a)]
		if !match(p[depth]) {
			continue
		}
		if len(p) == depth+1 {
			hit = true
		} else {
			next |= a & -a
		}
	}
	return next, hit
}

// member walks a member or element value starting at vs: reported whole
// when hit, else looked into.
func (w *spanWalk) member(vs, depth int, next uint64, hit bool) int {
	if !hit {
		return w.value(vs, depth+1, next)
	}
	e := w.s.skip(vs)
	switch {
	case e >= 0:
		w.dst = append(w.dst, [2]int{vs, e})
	case e == errEOF && w.s.cut && vs < len(w.s.d):
		w.dst = append(w.dst, [2]int{vs, len(w.s.d)})
	}
	return e
}

// nameMatches reports whether the raw content of a JSON key, decoded,
// names a secret.
func nameMatches(names *secretname.Set, key []byte) bool {
	if bytes.IndexByte(key, '\\') < 0 {
		return names.Match(key)
	}
	var buf [128]byte
	return names.Match(appendJSONUnescaped(buf[:0], key))
}
