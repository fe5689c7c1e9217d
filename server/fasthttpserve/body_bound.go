package fasthttpserve

import (
	"net"
	"time"

	"github.com/tollgate/tollgate/codec"
)

// fhBound is the deadline the upstream step gives a streamed body on the
// fasthttp transport (codec.BoundedBody): reads after it fail with
// codec.ErrBodyTimeout, and the connection's read deadline is brought
// forward to it, so that a client that stops sending is cut then rather
// than at client.body_timeout.
type fhBound struct {
	conn  net.Conn // the client's
	until time.Time
}

// ReadBefore implements codec.BoundedBody for the body read through b.
func (b *fhBody) ReadBefore(deadline time.Time) {
	d := &b.bound
	if deadline.IsZero() || !d.until.IsZero() && !deadline.Before(d.until) {
		return
	}
	d.until = deadline
	if d.conn != nil {
		// fasthttp sets the deadline again before it reads the next
		// request, so this one ends with the body.
		_ = d.conn.SetReadDeadline(deadline)
	}
}

// after passes on the result of a read of the body, unless the deadline
// has passed: then it is codec.ErrBodyTimeout, bytes that came late
// included (written upstream, they would meet the upstream write deadline
// and read as the backend's failure).
func (d *fhBound) after(n int, err error) (int, error) {
	if d.until.IsZero() || time.Now().Before(d.until) {
		return n, err
	}
	return 0, codec.ErrBodyTimeout
}
