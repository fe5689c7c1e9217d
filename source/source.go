// Package source reads one value of a request, the same way wherever the
// gateway needs one: condition expressions, sticky split keys, and next
// limiter dimensions, WAF allow-lists and recording masks. A Source is
// parsed once from its text ("query.page", "header.X-User-Id",
// "cookie.sid", "form.amount", "json.order.items.0.id", "ip", "path",
// "method", "consumer", "user") at config load; a Reader looks it up in a
// request without allocating.
//
// One semantics everywhere: the first value of a repeated query, form
// parameter, header or cookie; header names compared case-insensitively,
// everything else exactly; query and form values decoded ('+' and %XX);
// JSON strings unescaped; bodies read only when already in memory and never
// consumed.
package source

import (
	"fmt"
	"strings"
)

// Kind is where a Source looks.
type Kind uint8

const (
	Query Kind = iota
	Header
	Cookie
	Form
	JSON
	IP
	Path
	Method
	Consumer
	User
)

var kindNames = [...]string{"query", "header", "cookie", "form", "json", "ip", "path", "method", "consumer", "user"}

func (k Kind) String() string { return kindNames[k] }

// Named reports whether the kind takes a name after a dot.
func (k Kind) Named() bool { return k <= JSON }

// KindOf returns the kind a source text starts with ("query" → Query).
func KindOf(word string) (Kind, bool) {
	for i, n := range kindNames {
		if n == word {
			return Kind(i), true
		}
	}
	return 0, false
}

// Segment is one step of a JSON path: an object key, which when it is a
// plain decimal number also indexes arrays (Index >= 0).
type Segment struct {
	Key   string
	Index int
}

// MaxPathSegments bounds the number of segments in a JSON path.
const MaxPathSegments = 64

// Source is a compiled lookup. It is immutable and safe for concurrent use.
type Source struct {
	Kind Kind
	Name string    // query, header, cookie and form key
	Path []Segment // json path
	text string
}

// New builds a source of a named kind (query, header, cookie, form).
func New(k Kind, name string) Source {
	return Source{Kind: k, Name: name, text: k.String() + "." + name}
}

// NewJSON builds a json source from its path.
func NewJSON(path []Segment) Source {
	keys := make([]string, len(path))
	for i, s := range path {
		keys[i] = s.Key
	}
	return Source{Kind: JSON, Path: path, text: "json." + strings.Join(keys, ".")}
}

// Parse reads a source as operators write it in configuration:
// "query.NAME", "header.NAME", "cookie.NAME", "form.NAME", "json.a.b.0",
// "ip", "path", "method", "consumer", "user". (Condition expressions have
// their own parser, which also takes quoted names.)
func Parse(s string) (Source, error) {
	word, rest, dotted := strings.Cut(s, ".")
	k, ok := KindOf(word)
	if !ok {
		return Source{}, fmt.Errorf("source %q: want query., header., cookie., form., json., ip, path, method, consumer or user", s)
	}
	if !k.Named() {
		if dotted {
			return Source{}, fmt.Errorf("source %q: %s takes no name", s, word)
		}
		return Source{Kind: k, text: s}, nil
	}
	if rest == "" {
		return Source{}, fmt.Errorf("source %q: a name must follow %s.", s, word)
	}
	switch k {
	case JSON:
		keys := strings.Split(rest, ".")
		if len(keys) > MaxPathSegments {
			return Source{}, fmt.Errorf("source %q: json path longer than %d segments", s, MaxPathSegments)
		}
		path := make([]Segment, len(keys))
		for i, key := range keys {
			if key == "" {
				return Source{}, fmt.Errorf("source %q: empty path segment", s)
			}
			path[i] = Segment{Key: key, Index: ArrayIndex(key)}
		}
		return NewJSON(path), nil
	case Header:
		for i := 0; i < len(rest); i++ {
			if !tokenChar(rest[i]) {
				return Source{}, fmt.Errorf("source %q: not a valid header name", s)
			}
		}
	}
	return New(k, rest), nil
}

// String returns the source as written.
func (s *Source) String() string { return s.text }

// ArrayIndex returns the array index a path segment names, or -1: a
// decimal number without leading zeros, small enough to be an index.
func ArrayIndex(key string) int {
	if key == "" || len(key) > 9 || (len(key) > 1 && key[0] == '0') {
		return -1
	}
	v := 0
	for i := 0; i < len(key); i++ {
		if key[i] < '0' || key[i] > '9' {
			return -1
		}
		v = v*10 + int(key[i]-'0')
	}
	return v
}

func tokenChar(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c|0x20 && c|0x20 <= 'z' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
