package codec

import (
	"bytes"
	"github.com/tollgate/tollgate/internal/ascii"
	"iter"

	"github.com/valyala/fasthttp"
)

// Cookie returns the value of the request cookie named name (surrounding
// double quotes removed; empty but not nil when the cookie has no value),
// or nil when there is none. It reads the Cookie fields as received:
// fasthttp's own Cookie() parses them into a table and then re-serializes
// that table for the upstream, dropping quotes and odd pairs, so the
// gateway never calls it. Names are case-sensitive. The result aliases the
// request and is valid until it is released.
func Cookie(h *fasthttp.RequestHeader, name []byte) []byte {
	for _, line := range h.PeekAll("Cookie") {
		for k, v := range CookiePairs(line) {
			if !bytes.Equal(k, name) {
				continue
			}
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			return v
		}
	}
	return nil
}

// CookiePairs yields the name=value pairs of one Cookie field as sent,
// each trimmed of surrounding whitespace (a pair without '=' is a name
// with an empty value). The slices alias line.
func CookiePairs(line []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func([]byte, []byte) bool) {
		for len(line) > 0 {
			pair := line
			if i := bytes.IndexByte(line, ';'); i >= 0 {
				pair, line = line[:i], line[i+1:]
			} else {
				line = nil
			}
			k, v := pair, pair[len(pair):]
			if i := bytes.IndexByte(pair, '='); i >= 0 {
				k, v = pair[:i], pair[i+1:]
			}
			if !yield(ascii.TrimOWS(k), ascii.TrimOWS(v)) {
				return
			}
		}
	}
}
