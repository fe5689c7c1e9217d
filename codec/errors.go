package codec

import (
	"errors"
	"net"

	"github.com/valyala/fasthttp"
)

// framingErrors are the syntax errors answered 400 with their own message.
var framingErrors = []error{ErrObsFold, ErrBadHeaderName, ErrBadHeaderValue, ErrBareCR, ErrBadContentLength,
	ErrDupContentLength, ErrCLAndTE, ErrBadTE, ErrTEInHTTP10, ErrBadMethod, ErrBadVersion, ErrBadTarget, ErrMissingHost, ErrBadChunk,
	ErrBadPath, ErrBadHost, ErrBadForwardedFor, ErrDupContentType, ErrBareLFEnd}

// Errors lists every error of the package, for callers that prebuild one
// answer per error.
var Errors = append([]error{ErrHeaderTooLarge, ErrURITooLong, ErrBodyTooLarge, ErrMethodNotAllowed,
	ErrReadTimeout}, framingErrors...)

// ErrReadTimeout stands for a client too slow to send its request; Status
// maps it, and any net.Error timeout, to 408.
var ErrReadTimeout = errors.New("codec: request not received in time")

// Index returns the position of err (one of the package's errors, perhaps
// wrapped) in Errors, or -1, so callers can answer from a table built once:
// a flood of malformed requests allocates nothing.
func Index(err error) int {
	for i, e := range Errors {
		if err == e {
			return i
		}
	}
	for i, e := range Errors {
		if errors.Is(err, e) {
			return i
		}
	}
	return -1
}

// Status maps a parse or limit error (the package's own, or fasthttp's) to
// the status the client gets. Anything not recognised is a malformed
// request.
func Status(err error) int {
	// A walk down the chain with a type switch rather than errors.As, which
	// would allocate its target on every malformed request.
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch x := e.(type) {
		case *fasthttp.ErrSmallBuffer:
			return fasthttp.StatusRequestHeaderFieldsTooLarge
		case net.Error:
			if x.Timeout() {
				return fasthttp.StatusRequestTimeout
			}
		}
		switch e {
		case ErrHeaderTooLarge:
			return fasthttp.StatusRequestHeaderFieldsTooLarge
		case ErrURITooLong:
			return fasthttp.StatusRequestURITooLong
		case ErrBodyTooLarge, fasthttp.ErrBodyTooLarge:
			return fasthttp.StatusRequestEntityTooLarge
		case ErrMethodNotAllowed:
			return fasthttp.StatusMethodNotAllowed
		case ErrReadTimeout:
			return fasthttp.StatusRequestTimeout
		}
	}
	return fasthttp.StatusBadRequest
}

// Message is the client-facing text for a parse or limit error; it names the
// rule without echoing the client's bytes.
func Message(err error) string {
	switch Status(err) {
	case fasthttp.StatusRequestHeaderFieldsTooLarge:
		return "request header fields too large"
	case fasthttp.StatusRequestURITooLong:
		return "request URI too long"
	case fasthttp.StatusRequestEntityTooLarge:
		return "request body too large"
	case fasthttp.StatusMethodNotAllowed:
		return "method not allowed"
	case fasthttp.StatusRequestTimeout:
		return "request header not received in time"
	}
	for _, e := range framingErrors {
		if errors.Is(err, e) {
			return "malformed request: " + e.Error()[len("codec: "):]
		}
	}
	return "malformed request"
}
