package record

import (
	"bytes"
	"fmt"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/internal/ascii"
	"github.com/tollgate/tollgate/internal/secretname"
	"github.com/tollgate/tollgate/source"
)

// Masked stands in a recording for every value it does not keep. Replay
// reads it back: a masked header is not sent, and a masked JSON value in a
// recorded answer matches whatever the target answers there.
const Masked = "***"

var maskedJSON = []byte(`"` + Masked + `"`)

// masks are a rule's compiled mask list with the defaults: every name
// secretname.Default takes for a secret's (header fields, query and form
// parameters, multipart fields, JSON members at any depth, in requests
// and answers), and the names and paths the rule adds. Names are compared
// as secretname does: "apiKey" is "Api-Key" is "api_key".
type masks struct {
	headers   *secretname.Set
	query     *secretname.Set // query parameter names
	form      *secretname.Set // urlencoded form and multipart field names
	jsonPaths [][]source.Segment
	jsonNames *secretname.Set // JSON members masked at any depth
}

// compileMasks parses a rule's mask list (header., cookie., query., form.,
// json. sources) and adds the defaults.
func compileMasks(list []string) (masks, error) {
	var headers, query, form []string
	m := masks{jsonNames: secretname.Default}
	for _, text := range list {
		s, err := source.Parse(text)
		if err != nil {
			return masks{}, fmt.Errorf("mask: %v", err)
		}
		switch s.Kind {
		case source.Header:
			headers = append(headers, s.Name)
		case source.Cookie:
			// The Cookie field is masked whole already.
		case source.Query:
			query = append(query, s.Name)
		case source.Form:
			form = append(form, s.Name)
		case source.JSON:
			if len(m.jsonPaths) == source.MaxSpanPaths {
				return masks{}, fmt.Errorf("mask: at most %d json paths", source.MaxSpanPaths)
			}
			m.jsonPaths = append(m.jsonPaths, s.Path)
		default:
			return masks{}, fmt.Errorf("mask: %s cannot be masked; name a header., cookie., query., form. or json. value", text)
		}
	}
	m.headers = secretname.Default.WithExact(headers...)
	m.query = secretname.Default.WithExact(query...)
	m.form = secretname.Default.WithExact(form...)
	return m, nil
}

func (m *masks) header(name []byte) bool { return m.headers.Match(name) }

// minSecret is the shortest masked value also blotted out wherever else
// it appears in the exchange: shorter ones ("1", "yes") would deface
// unrelated text.
const minSecret = 8

// maxSecrets bounds the values a record remembers for blotting out.
const maxSecrets = 16

// secrets are the values masked in a request, remembered to blot them out
// where they recur (a backend that echoes a token in its answer).
type secrets struct {
	buf  []byte
	ends [maxSecrets]int
	n    int
}

func (s *secrets) reset() { s.buf, s.n = s.buf[:0], 0 }

func (s *secrets) add(v []byte) {
	if len(v) < minSecret || s.n == maxSecrets {
		return
	}
	for i := range s.n {
		if bytes.Equal(s.at(i), v) {
			return
		}
	}
	s.buf = append(s.buf, v...)
	s.ends[s.n] = len(s.buf)
	s.n++
}

func (s *secrets) at(i int) []byte {
	start := 0
	if i > 0 {
		start = s.ends[i-1]
	}
	return s.buf[start:s.ends[i]]
}

// scrub replaces every occurrence of a secret in b with Masked, in place
// (a secret is longer than Masked, so b only shrinks).
func (s *secrets) scrub(b []byte) []byte {
	for i := range s.n {
		sec := s.at(i)
		at := bytes.Index(b, sec)
		if at < 0 {
			continue
		}
		w := at
		for r := at; r < len(b); {
			if bytes.HasPrefix(b[r:], sec) {
				w += copy(b[w:], Masked)
				r += len(sec)
				continue
			}
			b[w] = b[r]
			w++
			r++
		}
		b = b[:w]
	}
	return b
}

// appendHeaderValue appends a masked header value: the scheme of an
// Authorization-like value is kept ("Bearer ***"), so replay knows what
// was there; the value itself (and its credentials part, and each cookie
// value) is remembered as a secret.
func appendHeaderValue(dst []byte, name, v []byte, sec *secrets) []byte {
	sec.add(v)
	switch {
	case codec.FieldNameIs(name, "Cookie") || codec.FieldNameIs(name, "Set-Cookie"):
		for rest := v; len(rest) > 0; {
			part := rest
			if i := bytes.IndexByte(rest, ';'); i >= 0 {
				part, rest = rest[:i], rest[i+1:]
			} else {
				rest = nil
			}
			if _, val, ok := bytes.Cut(part, []byte("=")); ok {
				sec.add(ascii.TrimOWS(val))
			}
		}
	default:
		if scheme, cred, ok := bytes.Cut(v, []byte(" ")); ok && isToken(scheme) {
			sec.add(ascii.TrimOWS(cred))
			dst = append(dst, scheme...)
			return append(append(dst, ' '), Masked...)
		}
	}
	return append(dst, Masked...)
}

func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !('a' <= c|0x20 && c|0x20 <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// appendParams appends the urlencoded string b with the values of names
// masked (every occurrence), byte for byte otherwise; masked values, raw
// and decoded, are remembered as secrets. scratch is a decoding buffer;
// it is returned for reuse.
func appendParams(dst, b []byte, names *secretname.Set, sec *secrets, scratch []byte) ([]byte, []byte) {
	for start := 0; ; {
		end := bytes.IndexByte(b[start:], '&')
		last := end < 0
		if last {
			end = len(b)
		} else {
			end += start
		}
		pair := b[start:end]
		key, val, hasVal := bytes.Cut(pair, []byte("="))
		if hasVal && paramMasked(key, names) {
			sec.add(val)
			scratch = source.AppendDecoded(scratch[:0], val)
			sec.add(scratch)
			dst = append(append(dst, key...), '=')
			dst = append(dst, Masked...)
		} else {
			dst = append(dst, pair...)
		}
		if last {
			return dst, scratch
		}
		dst = append(dst, '&')
		start = end + 1
	}
}

// paramMasked reports whether the urlencoded parameter name key, decoded,
// names a secret: "api%5Fkey" is "api_key".
func paramMasked(key []byte, names *secretname.Set) bool {
	var buf [256]byte
	return names.Match(source.AppendDecoded(buf[:0], key))
}

// appendJSON appends the JSON document doc with the values the masks
// designate replaced by "***", and remembers them as secrets. cut says doc
// is the start of a longer body (what a record keeps of it): a value the
// end cuts short is masked too. whole is false when doc is not valid JSON:
// then nothing is appended, since what follows the error could hold a
// designated value that was not found.
func (m *masks) appendJSON(dst, doc []byte, cut bool, spans [][2]int, sec *secrets) (out []byte, spansBuf [][2]int, whole bool) {
	spans, whole = source.JSONSpans(spans[:0], doc, cut, m.jsonPaths, m.jsonNames)
	if !whole {
		return dst, spans, false
	}
	last := 0
	for _, s := range spans {
		v := doc[s[0]:s[1]]
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			sec.add(v[1 : len(v)-1])
		} else {
			sec.add(v)
		}
		dst = append(dst, doc[last:s[0]]...)
		dst = append(dst, maskedJSON...)
		last = s[1]
	}
	return append(dst, doc[last:]...), spans, true
}
