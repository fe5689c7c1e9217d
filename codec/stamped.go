package codec

import (
	"fmt"

	"github.com/tollgate/tollgate/internal/ascii"
)

// stamped are the fields the gateway stamps itself on both sides: a
// client's copies never go upstream (they are GatewayOwned) and a
// backend's never reach the client, which gets the gateway's. The package
// that writes them declares them (package trace: the trace context), so
// that a format it adds needs no change here.
var stamped []string

// StampedByGateway declares names as fields the gateway stamps itself
// (see stamped). Call it from an init function only: the tables it
// extends are read by every request without a lock.
func StampedByGateway(names ...string) {
	for _, n := range names {
		if len(n) >= len(specialByLen) || len(n) >= len(answerNames) {
			panic(fmt.Sprintf("codec: field name longer than the class tables: %s", n))
		}
		if isStamped([]byte(n)) {
			continue
		}
		stamped = append(stamped, n)
		GatewayOwned = append(GatewayOwned, n)
		specialByLen[len(n)] = append(specialByLen[len(n)], specialName{n, classOwned, true})
		answerNames[len(n)] = append(answerNames[len(n)], answerName{n, answerDropped, 0})
	}
}

// isStamped reports whether k names a field declared with
// StampedByGateway (compared with case folded).
func isStamped(k []byte) bool {
	for _, n := range stamped {
		if len(k) == len(n) && ascii.EqualFold(k, n) {
			return true
		}
	}
	return false
}
