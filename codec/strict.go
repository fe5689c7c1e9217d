// Package codec holds the HTTP/1.1 rules the gateway applies at the edge on
// top of fasthttp's parser: strict RFC 9112 framing checks (so that one
// client request is exactly one upstream request), the client size limits,
// and the hop-by-hop and forwarding headers.
package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"github.com/tollgate/tollgate/internal/ascii"

	"github.com/valyala/fasthttp"
)

// Framing and syntax errors. Each one is answered 400 and the connection is
// closed: after any of them the gateway can no longer be sure where the next
// request on the connection starts.
var (
	ErrObsFold          = errors.New("codec: obsolete line folding in header")
	ErrBadHeaderName    = errors.New("codec: invalid header field name")
	ErrBadHeaderValue   = errors.New("codec: invalid character in header field value")
	ErrBareCR           = errors.New("codec: bare CR in header section")
	ErrBadContentLength = errors.New("codec: invalid Content-Length")
	ErrDupContentLength = errors.New("codec: conflicting Content-Length headers")
	ErrDupContentType   = errors.New("codec: repeated Content-Type header")
	ErrCLAndTE          = errors.New("codec: both Content-Length and Transfer-Encoding")
	ErrBadTE            = errors.New("codec: Transfer-Encoding other than chunked")
	ErrTEInHTTP10       = errors.New("codec: Transfer-Encoding in an HTTP/1.0 request")
	ErrBadMethod        = errors.New("codec: invalid method")
	ErrBadVersion       = errors.New("codec: unsupported HTTP version")
	ErrBadTarget        = errors.New("codec: invalid request target")
	ErrMissingHost      = errors.New("codec: missing or repeated Host header")
	ErrMethodNotAllowed = errors.New("codec: method not allowed at the edge")
	ErrBadChunk         = errors.New("codec: invalid chunked body")

	ErrHeaderTooLarge = errors.New("codec: header section too large")
	ErrURITooLong     = errors.New("codec: request target too long")
	ErrBodyTooLarge   = errors.New("codec: body too large")
)

// Limits is what a client may send. Zero fields mean "no limit".
type Limits struct {
	MaxHeaderBytes int
	MaxURIBytes    int
	MaxBodyBytes   int64
}

// tokenChars marks the bytes allowed in an RFC 9110 token (methods, field
// names, transfer codings).
var tokenChars = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// valueChars marks bytes allowed in a field value: VCHAR, obs-text, SP and
// HTAB. Every other control character, NUL included, is refused.
var valueChars = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = true
	}
	for c := 0x80; c <= 0xff; c++ {
		t[c] = true
	}
	t['\t'] = true
	return t
}()

// targetChars marks bytes allowed in a request target: visible ASCII only.
var targetChars = func() (t [256]bool) {
	for c := 0x21; c < 0x7f; c++ {
		t[c] = true
	}
	return t
}()

var (
	strChunked = []byte("chunked")
	strHTTP11  = []byte("HTTP/1.1")
	strHTTP10  = []byte("HTTP/1.0")
	strOPTIONS = []byte("OPTIONS")
)

// Check applies the edge's parsing rules to a request whose header fasthttp
// has parsed (with raw headers kept). It returns nil or one of the package's
// errors; it allocates nothing.
//
// fasthttp already refuses some of these cases; Check repeats them so the
// rules hold whatever the parser version, and adds the ones it lets through
// (Content-Length with Transfer-Encoding, codings other than chunked,
// obs-fold, control bytes in values).
func Check(h *fasthttp.RequestHeader, lim *Limits) error { return check(h, lim, nil) }

// check is Check, indexing the section's fields in r when r is not nil.
func check(h *fasthttp.RequestHeader, lim *Limits, r *Received) error {
	if err := checkRequestLine(h, lim); err != nil {
		return err
	}
	section := h.RawHeaders()
	if lim.MaxHeaderBytes > 0 && len(section) > lim.MaxHeaderBytes {
		return ErrHeaderTooLarge
	}
	var (
		clSeen, teSeen, hostSeen, ctSeen bool
		hosts                            int
	)
	for raw := section; len(raw) > 0; {
		var line []byte
		line, raw = nextLine(raw)
		if len(line) == 0 {
			continue // the blank line ending the section, if kept
		}
		name, value, err := splitFieldLine(line)
		if err != nil {
			return err
		}
		value = ascii.TrimOWS(value)
		if r != nil {
			r.add(section, name, value)
		}
		switch {
		case ascii.EqualFold(name, "Content-Length"):
			if clSeen {
				return ErrDupContentLength
			}
			clSeen = true
			if !isDigits(value) || len(value) > 18 {
				return ErrBadContentLength
			}
		case ascii.EqualFold(name, "Transfer-Encoding"):
			if teSeen || !bytes.EqualFold(value, strChunked) {
				return ErrBadTE
			}
			teSeen = true
		case ascii.EqualFold(name, "Content-Type"):
			// A singleton: were it repeated, the gateway and a backend
			// could each read another one (a form to one, text to the
			// other, and the reserved-name stripping skipped).
			if ctSeen {
				return ErrDupContentType
			}
			ctSeen = true
		case ascii.EqualFold(name, "Host"):
			hostSeen = true
			hosts++
		}
	}
	if clSeen && teSeen {
		return ErrCLAndTE
	}
	http11 := bytes.Equal(h.Protocol(), strHTTP11)
	if teSeen && !http11 {
		return ErrTEInHTTP10
	}
	if hosts > 1 || (http11 && !hostSeen) {
		return ErrMissingHost
	}
	if lim.MaxBodyBytes > 0 && int64(h.ContentLength()) > lim.MaxBodyBytes {
		return ErrBodyTooLarge
	}
	return nil
}

// CheckFieldLine checks one "name: value" line (without its line ending)
// of a header or trailer section.
func CheckFieldLine(line []byte) error {
	_, _, err := splitFieldLine(line)
	return err
}

func splitFieldLine(line []byte) (name, value []byte, err error) {
	if line[0] == ' ' || line[0] == '\t' {
		return nil, nil, ErrObsFold
	}
	// The name is token characters up to the colon: one walk finds both.
	colon := 0
	for colon < len(line) && tokenChars[line[colon]] {
		colon++
	}
	if colon == 0 || colon == len(line) || line[colon] != ':' {
		return nil, nil, ErrBadHeaderName
	}
	name = line[:colon]
	value = line[colon+1:]
	if plainValue(value) {
		return name, value, nil
	}
	for _, b := range value {
		if !valueChars[b] {
			if b == '\r' {
				return nil, nil, ErrBareCR
			}
			return nil, nil, ErrBadHeaderValue
		}
	}
	return name, value, nil
}

// plainValue reports whether v holds no control byte (below 0x20, or DEL)
// and so passes valueChars, eight bytes at a time. It is only a fast
// yes: false means "look byte by byte" (a tab is allowed but not plain).
// Every header section and answer passes here, on a loop whose caches the
// kernel's work has just filled, where a table lookup per byte costs more
// than arithmetic on words.
func plainValue(v []byte) bool {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	for len(v) >= 8 {
		x := binary.LittleEndian.Uint64(v)
		// A high bit set in a byte that was below 0x20, or that was DEL
		// (0x7f xor 0x7f is zero, below 1). Borrows run only upwards from
		// a byte already found, so a clean word gives zero.
		d := x ^ 0x7f7f7f7f7f7f7f7f
		if ((x-0x20*ones)&^x|(d-ones)&^d)&highs != 0 {
			return false
		}
		v = v[8:]
	}
	for _, b := range v {
		if b < 0x20 || b == 0x7f {
			return false
		}
	}
	return true
}

func checkRequestLine(h *fasthttp.RequestHeader, lim *Limits) error {
	m := h.Method()
	if len(m) == 0 || len(m) > 16 {
		return ErrBadMethod
	}
	for _, b := range m {
		if !tokenChars[b] {
			return ErrBadMethod
		}
	}
	if !methodAllowed(m) {
		return ErrMethodNotAllowed
	}
	p := h.Protocol()
	if !bytes.Equal(p, strHTTP11) && !bytes.Equal(p, strHTTP10) {
		return ErrBadVersion
	}
	uri := h.RequestURI()
	if lim.MaxURIBytes > 0 && len(uri) > lim.MaxURIBytes {
		return ErrURITooLong
	}
	if len(uri) == 0 {
		return ErrBadTarget
	}
	for _, b := range uri {
		if !targetChars[b] {
			return ErrBadTarget
		}
	}
	switch {
	case uri[0] == '/':
	case len(uri) == 1 && uri[0] == '*' && bytes.Equal(m, strOPTIONS):
	case ascii.HasPrefixFold(uri, "http://") || ascii.HasPrefixFold(uri, "https://"):
	default:
		return ErrBadTarget
	}
	return nil
}

// methodAllowed lists what an API gateway forwards. CONNECT would open a
// tunnel and TRACE reflects headers (cross-site tracing); neither belongs at
// the edge of an API.
func methodAllowed(m []byte) bool {
	switch string(m) {
	case "GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS":
		return true
	}
	return false
}

func isDigits(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
