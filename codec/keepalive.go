package codec

import (
	"time"

	"github.com/tollgate/tollgate/internal/ascii"
)

// maxKeepAliveSeconds bounds the timeout a backend may announce: beyond a
// day it is no limit worth keeping.
const maxKeepAliveSeconds = 86400

// KeepAliveTimeout reads the timeout parameter of a Keep-Alive field's
// value ("timeout=5, max=100"): how long the backend keeps an idle
// connection open before it closes it. ok is false when the value has no
// timeout, or one that is not a number of seconds; a second timeout
// parameter makes the value unreadable, since the backend said two things.
func KeepAliveTimeout(v []byte) (d time.Duration, ok bool) {
	seen, bad := false, false
	forEachToken(v, func(tok []byte) {
		name, val, found := cutByte(tok, '=')
		if !found || !ascii.EqualFold(ascii.TrimOWS(name), "timeout") {
			return
		}
		if seen {
			bad = true
			return
		}
		seen = true
		val = ascii.TrimOWS(val)
		if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
			val = val[1 : len(val)-1]
		}
		if len(val) == 0 {
			bad = true
			return
		}
		n := 0
		for _, b := range val {
			if b < '0' || b > '9' {
				bad = true
				return
			}
			if n = n*10 + int(b-'0'); n > maxKeepAliveSeconds {
				n = maxKeepAliveSeconds
			}
		}
		d = time.Duration(n) * time.Second
	})
	if !seen || bad {
		return 0, false
	}
	return d, true
}

// cutByte is bytes.Cut for one byte.
func cutByte(b []byte, sep byte) (before, after []byte, found bool) {
	for i, c := range b {
		if c == sep {
			return b[:i], b[i+1:], true
		}
	}
	return b, nil, false
}
