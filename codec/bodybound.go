package codec

import (
	"errors"
	"time"
)

// A streamed request body is read while the gateway writes it upstream,
// so a client that sends it slowly holds a backend connection as long as
// it keeps sending. The exchange's budget (the service's timeouts.total)
// bounds that: the upstream step gives the body its deadline
// (BoundedBody.ReadBefore), reads after it fail with ErrBodyTimeout, and
// the connection's own read deadline is brought forward to it
// (ReadLimiter), so that a client sending nothing at all is cut then too,
// not at the end of client.body_timeout.

// ErrBodyTimeout is a streamed request body that had not arrived when its
// exchange's budget ran out: the client's delay, answered 408, not the
// backend's.
var ErrBodyTimeout = errors.New("codec: request body not received in time")

// BoundedBody is a streamed request body whose reads can be given a
// deadline (the soonest of those given holds).
type BoundedBody interface {
	ReadBefore(deadline time.Time)
}

// ReadLimiter is a connection whose read deadline can be brought forward
// (never pushed back) for the rest of its current read phase.
type ReadLimiter interface {
	LimitReads(deadline time.Time)
}

// LimitedBy names the connection b reads from, whose read deadline
// ReadBefore brings forward; call it after StartFixed or StartChunked.
func (b *Body) LimitedBy(c ReadLimiter) { b.conn = c }

// ReadBefore implements BoundedBody; a later deadline than one already
// given changes nothing.
func (b *Body) ReadBefore(deadline time.Time) {
	if deadline.IsZero() || !b.until.IsZero() && !deadline.Before(b.until) {
		return
	}
	b.until = deadline
	if b.conn != nil {
		b.conn.LimitReads(deadline)
	}
}

// late reports whether the body's deadline has passed.
func (b *Body) late() bool {
	return !b.until.IsZero() && !time.Now().Before(b.until)
}
