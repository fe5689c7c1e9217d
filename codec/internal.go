package codec

import (
	"bytes"

	"github.com/tollgate/tollgate/internal/ascii"
)

// Internal names the header and parameter prefixes reserved for callers
// inside the company. Client requests carrying them lose them at the edge
// so nobody outside can pose as an internal caller.
//
// Matching is as loose as the loosest backend: header names fold case and
// read '_' as '-' (CGI, WSGI and PHP turn both into '_'); parameter names
// are percent- and '+'-decoded, lose leading whitespace, fold case and
// read ' ', '.', '[' and '-' as '_' (PHP's register rules), so
// "%69nternal_x", "internal.role", "internal+role", " internal_role" and
// "INTERNAL-role" all count as "internal_".
type Internal struct {
	HeaderPrefixes []string // e.g. "X-Internal-"
	QueryPrefixes  []string // e.g. "internal_"; applies to query and urlencoded form
}

func (in *Internal) header(name []byte) bool {
	for _, p := range in.HeaderPrefixes {
		if nameHasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Param reports whether the raw (still encoded) parameter name key is
// reserved.
func (in *Internal) Param(key []byte) bool {
	for _, p := range in.QueryPrefixes {
		if paramHasPrefix(key, p) {
			return true
		}
	}
	return false
}

func paramHasPrefix(key []byte, p string) bool {
	i, j := 0, 0
	started := false
	for j < len(p) {
		if i >= len(key) {
			return false
		}
		c, n := decodeParamByte(key, i)
		i += n
		if !started && (c <= ' ') {
			continue
		}
		started = true
		if foldParam(c) != foldParam(p[j]) {
			return false
		}
		j++
	}
	return true
}

// decodeParamByte decodes the byte of a form-encoded name at b[i]: '+' is a
// space and a valid %XX its byte. It returns the byte and how many input
// bytes it took.
func decodeParamByte(b []byte, i int) (byte, int) {
	switch c := b[i]; c {
	case '+':
		return ' ', 1
	case '%':
		if i+2 < len(b) {
			hi, lo := ascii.Unhex(b[i+1]), ascii.Unhex(b[i+2])
			if hi >= 0 && lo >= 0 {
				return byte(hi<<4 | lo), 3
			}
		}
		return c, 1
	default:
		return c, 1
	}
}

func foldParam(c byte) byte {
	switch {
	case c == ' ' || c == '.' || c == '[' || c == '-':
		return '_'
	case 'A' <= c && c <= 'Z':
		return c + 'a' - 'A'
	}
	return c
}

// StripParams removes the reserved parameters from a query string or
// urlencoded form, each with one separator next to it, leaving every other
// byte as it was. Both '&' and ';' separate parameters here, since some
// backends split on either. When nothing is reserved it returns q itself
// and false; otherwise the result is built in dst.
func (in *Internal) StripParams(dst, q []byte) ([]byte, bool) {
	if len(in.QueryPrefixes) == 0 || len(q) == 0 {
		return q, false
	}
	changed, kept := false, false
	out := dst[:0]
	start := 0
	for start <= len(q) {
		end := start
		for end < len(q) && q[end] != '&' && q[end] != ';' {
			end++
		}
		piece := q[start:end]
		key := piece
		for k, b := range piece {
			if b == '=' {
				key = piece[:k]
				break
			}
		}
		switch {
		case len(piece) > 0 && in.Param(key):
			changed = true
		case kept:
			out = append(out, q[start-1]) // the separator before the piece
			out = append(out, piece...)
		default:
			out = append(out, piece...)
			kept = true
		}
		if end == len(q) {
			break
		}
		start = end + 1
	}
	if !changed {
		return q, false
	}
	return out, true
}

// MultipartReserved reports whether a multipart/form-data body names a
// reserved parameter in any part's Content-Disposition (PHP, Rails and
// others read those parts as parameters like a form's). Parts cannot be
// cut out without rewriting the body's framing, so the caller refuses
// such a request.
func (in *Internal) MultipartReserved(body []byte) bool {
	if len(in.QueryPrefixes) == 0 {
		return false
	}
	for len(body) > 0 {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		if !ascii.HasPrefixFold(line, "content-disposition:") {
			continue
		}
		params := line[len("content-disposition:"):]
		for len(params) > 0 {
			i := bytes.IndexByte(params, ';')
			p := params
			if i >= 0 {
				p, params = params[:i], params[i+1:]
			} else {
				params = nil
			}
			p = ascii.TrimOWS(bytes.TrimRight(p, "\r"))
			if !ascii.HasPrefixFold(p, "name=") && !ascii.HasPrefixFold(p, "name*=") {
				continue
			}
			v := p[bytes.IndexByte(p, '=')+1:]
			v = bytes.Trim(v, `"`)
			if j := bytes.LastIndex(v, []byte("''")); j >= 0 { // RFC 5987 charset''value
				v = v[j+2:]
			}
			if in.Param(v) {
				return true
			}
		}
	}
	return false
}
