package route

import (
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/pipeline"
)

// Key reads one value of a request: a header, cookie or query parameter.
// It is what sticky splits hash.
type Key struct {
	src  keySource
	name []byte
	text string
}

type keySource uint8

const (
	keyHeader keySource = iota
	keyCookie
	keyQuery
)

// ParseKey parses "header.NAME", "cookie.NAME" or "query.NAME".
func ParseKey(s string) (Key, error) {
	kind, name, ok := strings.Cut(s, ".")
	if !ok || name == "" {
		return Key{}, fmt.Errorf("key %q: want header.NAME, cookie.NAME or query.NAME", s)
	}
	k := Key{name: []byte(name), text: s}
	switch kind {
	case "header":
		k.src = keyHeader
	case "cookie":
		k.src = keyCookie
	case "query":
		k.src = keyQuery
	default:
		return Key{}, fmt.Errorf("key %q: want header.NAME, cookie.NAME or query.NAME", s)
	}
	return k, nil
}

// String returns the key as written.
func (k Key) String() string { return k.text }

// Value returns the key's value in the request, or nil when absent. The
// bytes are valid until the request is released.
func (k Key) Value(c *pipeline.Ctx) []byte {
	switch k.src {
	case keyHeader:
		return c.Req.Header.PeekBytes(k.name)
	case keyCookie:
		return codec.Cookie(&c.Req.Header, k.name)
	default:
		return c.QueryArgs().PeekBytes(k.name)
	}
}
