package h2

import (
	"io"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/codec"
)

// boundedBody is a streamed request body (its start read already, then the
// stream's DATA) that the upstream step can give a deadline
// (codec.BoundedBody): reads after it fail with codec.ErrBodyTimeout, and
// the stream's read deadline is brought forward to it, so a client that
// stops sending is cut then rather than at client.body_timeout. Only the
// stream is cut: the 408 goes back on it, and the connection's other
// streams go on.
type boundedBody struct {
	io.Reader
	rc    *http.ResponseController // the stream's; nil until ServeHTTP sets it
	until time.Time
}

// ReadBefore implements codec.BoundedBody.
func (b *boundedBody) ReadBefore(deadline time.Time) {
	if deadline.IsZero() || !b.until.IsZero() && !deadline.Before(b.until) {
		return
	}
	b.until = deadline
	if b.rc != nil {
		_ = b.rc.SetReadDeadline(deadline)
	}
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.late() {
		return 0, codec.ErrBodyTimeout
	}
	n, err := b.Reader.Read(p)
	if b.late() {
		// Late bytes are not passed on: written upstream, they would meet
		// the upstream write deadline and read as the backend's failure.
		return 0, codec.ErrBodyTimeout
	}
	return n, err
}

func (b *boundedBody) late() bool {
	return !b.until.IsZero() && !time.Now().Before(b.until)
}

// boundBy lets the body x's request streams bring w's read deadline
// forward.
func (x *exchange) boundBy(w http.ResponseWriter) {
	if b, ok := x.req.BodyStream().(*boundedBody); ok {
		b.rc = http.NewResponseController(w)
	}
}
