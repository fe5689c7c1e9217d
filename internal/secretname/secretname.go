// Package secretname tells whether the name of a header field, a
// parameter, a JSON member or a setting says that its value is a secret,
// by what the name means rather than how it is spelt: apiKey, api_key,
// API-KEY and Api.Key are one name.
//
// A name is normalized by lowercasing ASCII letters and dropping '-', '_',
// '.' and spaces. It names a secret when its normalized form contains one
// of the strong words (password, secret, token, ...: newPassword,
// X-Amz-Security-Token, clientSecret) or is exactly one of the short words
// too common inside other names to be looked for there (key, pin, code:
// "keyword" and "pinned" are no secrets).
package secretname

import (
	"bytes"

	"github.com/tollgate/tollgate/internal/bytesconv"
)

// Strong are the words that make any name containing them a secret's.
var Strong = []string{"password", "passwd", "secret", "token", "apikey", "credential",
	"privatekey", "signature", "session", "cookie", "authorization"}

// Exact are the short names that are a secret's only when they are the
// whole name: "sign" and "X-Sign" are signatures, "design" is not.
var Exact = []string{"key", "code", "sig", "sign", "xsign", "pwd", "pass", "jwt", "otp", "pin"}

// Default is the set of names recordings and shown configurations mask
// whatever else is configured.
var Default = New(Strong, Exact)

// maxStrong bounds a strong word's length: a name longer than the
// normalization buffer is searched in windows that overlap by this much.
const maxStrong = 32

// Set is a set of secret names; it is immutable once built and safe for
// concurrent use.
type Set struct {
	contains [][]byte // normalized
	exact    []string // normalized
	// byFirst indexes contains by first byte: a name is read once, each
	// byte only compared with the words that start with it.
	byFirst [256][]int8
}

// New builds a set from strong words (looked for inside names) and exact
// names (the whole name); both are normalized here. A strong word longer
// than 32 bytes once normalized is taken as an exact name.
func New(strong, exact []string) *Set {
	s := &Set{}
	for _, w := range strong {
		if n := Normalize(w); n != "" && len(n) <= maxStrong {
			s.contains = append(s.contains, []byte(n))
		} else if n != "" {
			s.exact = append(s.exact, n)
		}
	}
	for _, w := range exact {
		if n := Normalize(w); n != "" {
			s.exact = append(s.exact, n)
		}
	}
	if len(s.contains) > 127 {
		panic("secretname: more than 127 strong words")
	}
	for i, w := range s.contains {
		s.byFirst[w[0]] = append(s.byFirst[w[0]], int8(i))
	}
	return s
}

// WithExact returns a set that also holds the exact names given (a
// route's own mask list); s is unchanged.
func (s *Set) WithExact(names ...string) *Set {
	out := &Set{contains: s.contains, exact: append([]string(nil), s.exact...), byFirst: s.byFirst}
	for _, w := range names {
		if n := Normalize(w); n != "" {
			out.exact = append(out.exact, n)
		}
	}
	return out
}

// Normalize is name lowercased (ASCII) without '-', '_', '.' and spaces.
func Normalize(name string) string {
	b := make([]byte, 0, len(name))
	for i := 0; i < len(name); i++ {
		if c, keep := fold(name[i]); keep {
			b = append(b, c)
		}
	}
	return string(b)
}

func fold(c byte) (byte, bool) {
	switch {
	case c == '-' || c == '_' || c == '.' || c == ' ':
		return 0, false
	case 'A' <= c && c <= 'Z':
		return c + 'a' - 'A', true
	}
	return c, true
}

// MatchString is Match for a string.
func (s *Set) MatchString(name string) bool { return s.Match(bytesconv.S2B(name)) }

// Match reports whether name names a secret. It allocates nothing.
func (s *Set) Match(name []byte) bool {
	if s == nil {
		return false
	}
	var buf [128]byte
	n, whole := 0, true
	for i := 0; i < len(name); i++ {
		c, keep := fold(name[i])
		if !keep {
			continue
		}
		if n == len(buf) {
			// A long name is searched in windows; each keeps the end of
			// the last, so a word across the seam is still found.
			if s.containsIn(buf[:n]) {
				return true
			}
			n = copy(buf[:], buf[n-maxStrong+1:n])
			whole = false
		}
		buf[n] = c
		n++
	}
	if whole {
		for _, e := range s.exact {
			if string(buf[:n]) == e {
				return true
			}
		}
	}
	return s.containsIn(buf[:n])
}

func (s *Set) containsIn(b []byte) bool {
	for i, c := range b {
		for _, k := range s.byFirst[c] {
			if bytes.HasPrefix(b[i:], s.contains[k]) {
				return true
			}
		}
	}
	return false
}
