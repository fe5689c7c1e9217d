package codec

import (
	"bytes"
	"errors"
	"net/netip"

	"github.com/tollgate/tollgate/internal/ascii"
	"github.com/tollgate/tollgate/internal/bytesconv"
	"github.com/valyala/fasthttp"
)

// Target errors. A request whose target or Host cannot be put in one
// unambiguous form is refused with 400: forwarding it would let the gateway
// and the backend disagree about what was asked for.
var (
	ErrBadPath = errors.New("codec: invalid or ambiguous path")
	ErrBadHost = errors.New("codec: invalid Host")
)

// Target is a request's target in the one form the gateway routes on: the
// canonical path (see AppendCanonicalPath), the query exactly as received,
// and the Host the request is for; and the path to forward (ForwardPath). The buffers are the
// Target's own (copied from the request), so rewriting the request's header
// never changes them; they are reused by the next ParseTarget.
type Target struct {
	Path  []byte
	Query []byte // without the '?'; nil when the target had none
	Host  []byte // as received, port included; validated
	// Sent is the path as the client sent it when it means exactly what
	// Path does (SameMeaning), else empty: a proxy forwards the path it
	// received (RFC 9110 §7.7), and a backend may tell "%7E" from "~" in
	// its own routing or signatures.
	Sent []byte
	// HasQuery reports a '?' in the target, even with an empty query.
	HasQuery bool
}

// Reset empties t, keeping its buffers.
func (t *Target) Reset() {
	t.Path, t.Query, t.Host, t.Sent = t.Path[:0], t.Query[:0], t.Host[:0], t.Sent[:0]
	t.HasQuery = false
}

// ForwardPath is the path to send upstream when no rewrite changed it:
// the client's own bytes when they mean what the gateway routed on, the
// canonical path otherwise.
func (t *Target) ForwardPath() []byte {
	if len(t.Sent) > 0 {
		return t.Sent
	}
	return t.Path
}

var (
	strHTTPScheme  = "http://"
	strHTTPSScheme = "https://"
)

// ParseTarget fills t from a request header that Check has accepted: an
// origin-form target ("/path?query"), an absolute-form one
// ("http://authority/path?query", whose authority replaces Host as RFC 9112
// §3.2.2 says), or "*" for OPTIONS. It allocates only when t's buffers
// grow.
func ParseTarget(t *Target, h *fasthttp.RequestHeader) error {
	t.Reset()
	uri := h.RequestURI()
	host := h.Host()
	if bytes.IndexByte(uri, '#') >= 0 {
		return ErrBadTarget // a fragment is never part of a request target
	}
	switch {
	case len(uri) == 0:
		return ErrBadTarget
	case uri[0] == '/':
	case len(uri) == 1 && uri[0] == '*':
		t.Path = append(t.Path, '*')
		return t.setHost(host)
	case ascii.HasPrefixFold(uri, strHTTPScheme):
		rest := uri[len(strHTTPScheme):]
		end := bytes.IndexAny(rest, "/?")
		if end < 0 {
			end = len(rest)
		}
		if end == 0 {
			return ErrBadTarget // "http:///x": no authority
		}
		host, uri = rest[:end], rest[end:]
	default:
		// https:// on a cleartext listener, or anything else.
		return ErrBadTarget
	}
	path := uri
	if q := bytes.IndexByte(uri, '?'); q >= 0 {
		path = uri[:q]
		t.Query = append(t.Query, uri[q+1:]...)
		t.HasQuery = true
	}
	if len(path) == 0 {
		path = strSlash
	}
	var err error
	t.Path, err = AppendCanonicalPath(t.Path, path)
	if err == nil && SameMeaning(path, t.Path) {
		t.Sent = append(t.Sent, path...)
	}
	// The host is checked last so that a request refused for it still
	// has its target filled in (for the access log, and for callers that
	// build requests by hand).
	if herr := t.setHost(host); err == nil {
		err = herr
	}
	return err
}

var strSlash = []byte("/")

func (t *Target) setHost(host []byte) error {
	t.Host = append(t.Host, host...)
	if len(host) == 0 {
		return ErrMissingHost
	}
	if !ValidHost(host) {
		return ErrBadHost
	}
	return nil
}

// ValidHost reports whether h is "host[:port]" with host a reg-name of
// letters, digits, '-', '.', '_' and '~', or an IPv6 literal in brackets.
// Userinfo, percent-escapes and every other character are refused, so that
// no two parsers can read a different host out of it.
func ValidHost(h []byte) bool {
	if len(h) == 0 || len(h) > 262 {
		return false
	}
	name := h
	if h[0] == '[' {
		end := bytes.IndexByte(h, ']')
		if end < 0 {
			return false
		}
		a, err := netip.ParseAddr(bytesconv.B2S(h[1:end]))
		if err != nil || !a.Is6() || a.Zone() != "" {
			return false
		}
		return validPort(h[end+1:])
	}
	if i := bytes.IndexByte(h, ':'); i >= 0 {
		name = h[:i]
		if !validPort(h[i:]) {
			return false
		}
	}
	if len(name) == 0 || len(name) > 255 {
		return false
	}
	for _, b := range name {
		if !hostChars[b] {
			return false
		}
	}
	return true
}

// validPort accepts "" or ":" followed by 1–5 digits up to 65535.
func validPort(p []byte) bool {
	if len(p) == 0 {
		return true
	}
	if p[0] != ':' || len(p) < 2 || len(p) > 6 {
		return false
	}
	n := 0
	for _, b := range p[1:] {
		if b < '0' || b > '9' {
			return false
		}
		n = n*10 + int(b-'0')
	}
	return n <= 65535
}

var hostChars = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "-._~" {
		t[c] = true
	}
	return t
}()

// pathClass says how AppendCanonicalPath treats a byte of the path.
type pathClass uint8

const (
	pathEncode     pathClass = iota // percent-encode it
	pathUnreserved                  // ALPHA DIGIT - . _ ~ : literal, and decoded when escaped
	pathReserved                    // sub-delims, ':' and '@': literal, kept escaped when escaped
)

var pathClasses = func() (t [256]pathClass) {
	for c := '0'; c <= '9'; c++ {
		t[c] = pathUnreserved
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = pathUnreserved
		t[c-'a'+'A'] = pathUnreserved
	}
	for _, c := range "-._~" {
		t[c] = pathUnreserved
	}
	for _, c := range "!$&'()*+,;=:@" {
		t[c] = pathReserved
	}
	return t
}()

const upperHex = "0123456789ABCDEF"

// AppendCanonicalPath appends the canonical form of the absolute path p
// (it must start with '/') to dst:
//
//   - escapes of unreserved characters are decoded ("%7Euser" → "~user"),
//     every other escape is kept, with upper-case hex ("%2f" → "%2F"), so
//     "%2F", "%3F", "%25" stay what they are and nothing is decoded twice;
//   - bytes that may not appear raw in a path (non-ASCII, '"', '\\', '{', …)
//     are percent-encoded;
//   - runs of '/' become one (as nginx does, so "//admin" cannot miss an
//     "/admin/" route and reach a backend that merges slashes);
//   - "." and ".." segments are removed (RFC 3986 §5.2.4), ".." never
//     climbing above the root.
//
// It refuses (ErrBadPath) malformed escapes, escaped control characters,
// and segments a backend could still take for a dot segment: "..;x" and
// ".;x" (path parameters), and segments whose escapes decode, once or more,
// to a dot segment or to one joined by '/' or '\\' ("%252e%252e",
// "..%2F..", "..%5C").
//
// Applied to its own output it changes nothing: canonical paths are fixed
// points, which is what lets a rewrite check its result.
func AppendCanonicalPath(dst, p []byte) ([]byte, error) {
	if len(p) == 0 || p[0] != '/' {
		return dst, ErrBadPath
	}
	base := len(dst)
	i := 0
	for i < len(p) {
		// p[i] is '/': one segment follows.
		for i < len(p) && p[i] == '/' {
			i++
		}
		segStart := len(dst)
		dst = append(dst, '/')
		suspect := false // an escape or backslash that may hide a dot segment
		for i < len(p) && p[i] != '/' {
			b := p[i]
			if b == '%' {
				if i+2 >= len(p) {
					return dst[:base], ErrBadPath
				}
				hi, lo := ascii.Unhex(p[i+1]), ascii.Unhex(p[i+2])
				if hi < 0 || lo < 0 {
					return dst[:base], ErrBadPath
				}
				v := byte(hi<<4 | lo)
				if v < 0x20 || v == 0x7f {
					return dst[:base], ErrBadPath
				}
				if pathClasses[v] == pathUnreserved {
					dst = append(dst, v)
				} else {
					dst = append(dst, '%', upperHex[v>>4], upperHex[v&15])
					suspect = true
				}
				i += 3
				continue
			}
			if b <= ' ' || b == 0x7f {
				return dst[:base], ErrBadPath // control bytes and space are never a path
			}
			if pathClasses[b] == pathEncode {
				dst = append(dst, '%', upperHex[b>>4], upperHex[b&15])
				suspect = suspect || b == '\\'
			} else {
				dst = append(dst, b)
			}
			i++
		}
		seg := dst[segStart+1:]
		last := i >= len(p)
		switch {
		case isDot(seg):
			dst = dst[:segStart]
			if last {
				dst = append(dst, '/')
			}
			continue
		case isDotDot(seg):
			dst = dst[:segStart]
			if j := bytes.LastIndexByte(dst[base:], '/'); j >= 0 {
				dst = dst[:base+j]
			}
			if last {
				dst = append(dst, '/')
			}
			continue
		}
		if dotParam(seg) {
			return dst[:base], ErrBadPath
		}
		if suspect {
			var bad bool
			dst, bad = hidesDotSegment(dst, segStart+1)
			if bad {
				return dst[:base], ErrBadPath
			}
		}
	}
	if len(dst) == base {
		dst = append(dst, '/')
	}
	return dst, nil
}

func isDot(s []byte) bool    { return len(s) == 1 && s[0] == '.' }
func isDotDot(s []byte) bool { return len(s) == 2 && s[0] == '.' && s[1] == '.' }

// dotParam reports a segment that is "." or ".." followed by path
// parameters (";x"), which Tomcat and others treat as a dot segment.
func dotParam(seg []byte) bool {
	if i := bytes.IndexByte(seg, ';'); i >= 0 {
		seg = seg[:i]
		return isDot(seg) || isDotDot(seg)
	}
	return false
}

// maxDecodeRounds bounds how often hidesDotSegment decodes a segment: four
// rounds undo "%2525252e", deeper nesting is refused outright.
const maxDecodeRounds = 4

// hidesDotSegment decodes the segment at dst[from:] again and again (as a
// backend that decodes more than once would) in scratch space after it, and
// reports whether any piece of it, split at '/' or '\\' and cut at ';', is
// "." or "..". It returns dst as it was (its capacity perhaps grown).
func hidesDotSegment(dst []byte, from int) ([]byte, bool) {
	end := len(dst)
	cur := dst[from:end]
	for round := 0; round < maxDecodeRounds; round++ {
		start := len(dst)
		changed := false
		for i := 0; i < len(cur); i++ {
			b := cur[i]
			if b == '%' && i+2 < len(cur) {
				if hi, lo := ascii.Unhex(cur[i+1]), ascii.Unhex(cur[i+2]); hi >= 0 && lo >= 0 {
					b = byte(hi<<4 | lo)
					i += 2
					changed = true
				}
			}
			dst = append(dst, b)
		}
		cur = dst[start:]
		if dotPiece(cur) {
			return dst[:end], true
		}
		if !changed {
			return dst[:end], false
		}
		if round == maxDecodeRounds-1 && bytes.IndexByte(cur, '%') >= 0 {
			return dst[:end], true
		}
	}
	return dst[:end], false
}

// dotPiece reports whether s, split at '/' and '\\', has a piece that is a
// dot segment, with or without path parameters.
func dotPiece(s []byte) bool {
	for len(s) > 0 {
		i := bytes.IndexAny(s, `/\`)
		piece := s
		if i >= 0 {
			piece, s = s[:i], s[i+1:]
		} else {
			s = nil
		}
		if j := bytes.IndexByte(piece, ';'); j >= 0 {
			piece = piece[:j]
		}
		if isDot(piece) || isDotDot(piece) {
			return true
		}
	}
	return false
}

// SameMeaning reports whether the path p a client sent, whose canonical
// form is canon, differs from it in nothing but the spelling of escapes:
// an escaped unreserved character where canon has it literal ("%7E",
// "%7e" for "~", "%61" for "a"), or hex digits in lower case ("%2f" for
// "%2F"). Such a path has the segments canon has — no "." or ".."
// segment, no empty one, no byte the canonical form had to escape — so a
// backend decoding it reads what the gateway routed and checked. Any other
// difference (dot segments resolved, slashes merged, '\', non-ASCII or
// other bytes escaped) and the canonical form is what may go upstream.
func SameMeaning(p, canon []byte) bool {
	j := 0
	for i := 0; i < len(p); {
		if j >= len(canon) {
			return false
		}
		b := p[i]
		if b != '%' {
			if b != canon[j] || b != '/' && pathClasses[b] == pathEncode {
				return false
			}
			i++
			j++
			continue
		}
		if i+2 >= len(p) {
			return false
		}
		hi, lo := ascii.Unhex(p[i+1]), ascii.Unhex(p[i+2])
		if hi < 0 || lo < 0 {
			return false
		}
		v := byte(hi<<4 | lo)
		switch {
		case canon[j] == '%':
			if j+2 >= len(canon) || canon[j+1] != upperHex[v>>4] || canon[j+2] != upperHex[v&15] {
				return false
			}
			j += 3
		case canon[j] == v && pathClasses[v] == pathUnreserved:
			j++
		default:
			return false
		}
		i += 3
	}
	return j == len(canon)
}

// IsCanonicalPath reports whether p is its own canonical form: what a
// rewrite produced may go upstream only if it is. scratch is working space;
// the (perhaps grown) buffer is returned for reuse.
func IsCanonicalPath(scratch, p []byte) ([]byte, bool) {
	out, err := AppendCanonicalPath(scratch[:0], p)
	return out[:0], err == nil && bytes.Equal(out, p)
}

// CanonicalPath is AppendCanonicalPath for configuration: it returns the
// canonical form of a configured path or prefix, or an error naming it.
func CanonicalPath(p string) (string, error) {
	out, err := AppendCanonicalPath(nil, []byte(p))
	if err != nil {
		return "", err
	}
	return string(out), nil
}
