// Package grpcwire holds what gRPC over HTTP/2 writes in its fields that
// more than one side of the gateway reads or writes: the grpc-timeout
// value.
package grpcwire

import (
	"math"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/internal/bytesconv"
)

// ParseTimeout reads a grpc-timeout value: up to eight digits and a unit
// (H, M, S, m, u, n). Anything else, or a value too long to hold, is not
// a timeout.
func ParseTimeout(v []byte) (time.Duration, bool) {
	if len(v) < 2 || len(v) > 9 {
		return 0, false
	}
	n, err := strconv.ParseInt(bytesconv.B2S(v[:len(v)-1]), 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, false
	}
	if n > int64(math.MaxInt64/unit) {
		return 0, false
	}
	return time.Duration(n) * unit, true
}

// AppendTimeout appends d as a grpc-timeout value: at most eight digits
// and a unit, at least 1m.
func AppendTimeout(dst []byte, d time.Duration) []byte {
	ms := max(d.Milliseconds(), 1)
	if ms < 1e8 {
		return append(strconv.AppendInt(dst, ms, 10), 'm')
	}
	return append(strconv.AppendInt(dst, min(int64(d/time.Second), 99999999), 10), 'S')
}
