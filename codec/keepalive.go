package codec

import (
	"bytes"
	"time"

	"github.com/tollgate/tollgate/internal/ascii"
)

// maxKeepAliveSeconds bounds the timeout a backend may announce: beyond a
// day it is no limit worth keeping.
const maxKeepAliveSeconds = 86400

var strEquals = []byte("=")

// KeepAliveTimeout reads the timeout parameter of a Keep-Alive field's
// value ("timeout=5, max=100"): how long the backend keeps an idle
// connection open before it closes it. ok is false when the value has no
// timeout that is a number of seconds. A value with two gives the shorter:
// a request sent within it is safe by either.
func KeepAliveTimeout(v []byte) (d time.Duration, ok bool) {
	forEachToken(v, func(tok []byte) {
		name, val, found := bytes.Cut(tok, strEquals)
		if !found || !ascii.EqualFold(ascii.TrimOWS(name), "timeout") {
			return
		}
		val = ascii.TrimOWS(val)
		if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
			val = val[1 : len(val)-1]
		}
		n, isNumber := decimal(val)
		if !isNumber {
			return
		}
		if t := time.Duration(min(n, maxKeepAliveSeconds)) * time.Second; !ok || t < d {
			d, ok = t, true
		}
	})
	return d, ok
}
