package h2

import (
	"bytes"
	"errors"
	"strings"

	"github.com/tollgate/tollgate/codec"
	"golang.org/x/net/http2/hpack"
)

// A request decoded from a HEADERS block is made the HTTP/1.1 header
// section a client would have sent (AppendHead), and parsed by the same
// parser as HTTP/1.1's: the gateway's strict checks and the strip of its
// internal fields read the section as received, so a request built field
// by field would pass them unread.

// ErrMalformed is a request RFC 9113 §8.1.1 calls malformed: its stream is
// reset with PROTOCOL_ERROR, and no answer is written.
var ErrMalformed = errors.New("h2: malformed request")

// Head is what AppendHead learned of a request besides its section.
type Head struct {
	// ContentLength is the declared length, -1 for none.
	ContentLength int64
	// IsHead and GRPC: a HEAD request (no answer body), a gRPC call
	// (answers the gateway makes itself are made gRPC errors).
	IsHead bool
	GRPC   bool
}

// AppendHead appends to dst the request fields make as an HTTP/1.1
// request line and header section, without the blank line that ends it
// (the body's framing field goes before it once the body is known).
// endStream is END_STREAM on the HEADERS frame: no body follows.
//
// The framer has checked names (lowercase tokens), values (no CR, LF or
// NUL), the pseudo-fields' order, and bounded the list; AppendHead checks
// the rest: the pseudo-fields present, known and unique, no
// connection-specific field, TE only "trailers", Host the same as
// :authority, and the request line's parts, any byte of which out of place
// would change the line. A malformed request is ErrMalformed; one the
// gateway answers itself (400, 413) is a codec error.
func AppendHead(dst []byte, fields []hpack.HeaderField, endStream bool, o *Options) ([]byte, Head, error) {
	hd := Head{ContentLength: -1}
	var method, scheme, authority, path string
	var seen uint8
	hosts, lengths := 0, 0
	var host string
	for i := range fields {
		f := &fields[i]
		if len(f.Name) == 0 || f.Name[0] != ':' {
			switch f.Name {
			case "connection", "proxy-connection", "keep-alive", "transfer-encoding", "upgrade":
				return dst, hd, ErrMalformed
			case "te":
				if f.Value != "trailers" {
					return dst, hd, ErrMalformed
				}
			case "host":
				hosts++
				host = f.Value
			case "content-length":
				lengths++
			case "content-type":
				hd.GRPC = hd.GRPC || isGRPCType(f.Value)
			}
			continue
		}
		var bit uint8
		switch f.Name {
		case ":method":
			bit, method = 1, f.Value
		case ":scheme":
			bit, scheme = 2, f.Value
		case ":authority":
			bit, authority = 4, f.Value
		case ":path":
			bit, path = 8, f.Value
		default:
			return dst, hd, ErrMalformed // :protocol needs extended CONNECT, not offered
		}
		if seen&bit != 0 {
			return dst, hd, ErrMalformed
		}
		seen |= bit
	}
	if method == "CONNECT" {
		// CONNECT names a host, not a path: no route takes it, as over
		// HTTP/1.1.
		if path != "" || scheme != "" || authority == "" {
			return dst, hd, ErrMalformed
		}
		return dst, hd, codec.ErrBadTarget
	}
	if method == "" || path == "" || (scheme != "https" && scheme != "http") {
		return dst, hd, ErrMalformed
	}
	switch {
	case hosts > 1:
		return dst, hd, ErrMalformed
	case hosts == 1 && authority != "" && host != authority:
		return dst, hd, ErrMalformed
	case authority == "":
		authority = host
	}
	if strings.IndexByte(authority, '@') >= 0 {
		return dst, hd, ErrMalformed // userinfo: not in an HTTP(S) authority (RFC 9110 §4.2.4)
	}
	if authority == "" {
		return dst, hd, codec.ErrMissingHost
	}
	if !isToken(method) || !isVisible(path) || !isVisible(authority) {
		return dst, hd, codec.ErrBadTarget
	}
	// Origin form only (RFC 9113 §8.3.1): an absolute :path would name a
	// host of its own beside :authority.
	if path[0] != '/' && (path != "*" || method != "OPTIONS") {
		return dst, hd, codec.ErrBadTarget
	}
	if lengths > 1 {
		return dst, hd, codec.ErrBadContentLength
	}
	hd.IsHead = method == "HEAD"

	dst = append(dst, method...)
	dst = append(dst, ' ')
	dst = append(dst, path...)
	dst = append(dst, " HTTP/1.1\r\nHost: "...)
	dst = append(dst, authority...)
	dst = append(dst, "\r\n"...)
	cookies := false
	for i := range fields {
		f := &fields[i]
		switch {
		case f.Name[0] == ':', f.Name == "host":
			continue
		case f.Name == "cookie":
			cookies = true
			continue
		case f.Name == "content-length":
			n, ok := parseLength(f.Value)
			if !ok {
				return dst, hd, ErrMalformed
			}
			hd.ContentLength = n
			if endStream && n != 0 {
				// Declared, and no DATA at all: cut short, as one over
				// HTTP/1.1 is refused.
				return dst, hd, codec.ErrBadContentLength
			}
			if o.MaxBodyBytes > 0 && n > o.MaxBodyBytes {
				return dst, hd, codec.ErrBodyTooLarge
			}
		}
		dst = appendField(dst, f.Name, f.Value)
	}
	if cookies {
		// RFC 9113 §8.2.3: the cookie fields a client split go to an
		// HTTP/1.1 backend as one, joined with "; ".
		dst = append(dst, "cookie: "...)
		first := true
		for i := range fields {
			if f := &fields[i]; f.Name == "cookie" {
				for part := range strings.SplitSeq(f.Value, ";") {
					if part = strings.Trim(part, " \t"); part == "" {
						continue
					}
					if !first {
						dst = append(dst, "; "...)
					}
					first = false
					dst = append(dst, part...)
				}
			}
		}
		dst = append(dst, "\r\n"...)
	}
	return dst, hd, nil
}

// appendField appends "name: value" with the value trimmed of surrounding
// whitespace, as an HTTP/1.1 parser trims it (RFC 9113 §8.2.1 does not
// allow h2 to send it).
func appendField(dst []byte, name, value string) []byte {
	dst = append(dst, name...)
	dst = append(dst, ": "...)
	dst = append(dst, strings.Trim(value, " \t")...)
	return append(dst, "\r\n"...)
}

// parseLength reads a content-length: digits only, below 2^62.
func parseLength(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func isGRPCType(ct string) bool {
	return ct == "application/grpc" || strings.HasPrefix(ct, "application/grpc+") || strings.HasPrefix(ct, "application/grpc;")
}

// AnswerFields calls emit with each field of an answer's header section
// (fasthttp's, the status line first) that HTTP/2 carries: the
// connection-specific ones and Trailer (the trailers go as the stream's
// last HEADERS) are left out.
func AnswerFields(raw []byte, emit func(name, value []byte)) {
	if i := bytes.IndexByte(raw, '\n'); i >= 0 {
		raw = raw[i+1:]
	}
	for len(raw) > 0 {
		i := bytes.IndexByte(raw, '\n')
		if i < 0 {
			return
		}
		line := bytes.TrimRight(raw[:i], "\r")
		raw = raw[i+1:]
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			continue
		}
		name, value := line[:colon], bytes.TrimLeft(line[colon+1:], " \t")
		if isHopByHop(name) || bytes.EqualFold(name, strTrailer) {
			continue
		}
		emit(name, value)
	}
}
