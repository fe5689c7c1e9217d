package codec

import (
	"bytes"
	"github.com/tollgate/tollgate/internal/ascii"

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
			if !bytes.Equal(ascii.TrimOWS(k), name) {
				continue
			}
			v = ascii.TrimOWS(v)
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			return v
		}
	}
	return nil
}
