package fasthttpserve

import (
	"io"
	"net"
	"time"

	"github.com/tollgate/tollgate/server/transport"
)

// Lingering after the refusal of an h2c client, so that the client reads
// the refusal before the close: closing with its frames unread would make
// the kernel reset the connection, and a reset can destroy the answer.
const (
	refusalLinger      = time.Second
	refusalLingerBytes = 64 << 10
)

// sniff reads a cleartext connection's first bytes, under the header
// timeout and no further than the HTTP/2 preface needs (an HTTP/1.x
// request parts from it within its first bytes, most at the first): a
// connection that opens with the preface goes to the HTTP/2 server (h2c
// with prior knowledge), or is refused when there is none; any other is
// fasthttp's, its first bytes read again before the socket's. A
// connection that sends nothing, or stops within a preface, is closed as
// fasthttp closes one that sends no request.
func (l *alpnListener) sniff(raw net.Conn) {
	if l.timeout > 0 {
		_ = raw.SetReadDeadline(time.Now().Add(l.timeout))
	}
	buf := make([]byte, len(transport.ClientPreface))
	n, h2, more := 0, false, true
	var err error
	for more && err == nil {
		var m int
		m, err = raw.Read(buf[n:])
		n += m
		h2, more = transport.PrefaceMatch(buf[:n])
	}
	<-l.shaking
	_ = raw.SetReadDeadline(time.Time{})
	conn := &transport.PrefacedConn{Conn: raw, Read0: buf[:n]}
	switch {
	case h2 && l.h2 == nil:
		refuseH2C(raw, l.timeout)
	case h2 && l.open() >= l.max:
		_ = raw.Close()
	case h2:
		l.h2.ServeConn(conn, transport.PeerOf(raw.RemoteAddr()), l.h)
	case n == 0 || more:
		_ = raw.Close()
	default:
		l.pass(conn)
	}
}

// refuseH2C refuses an h2c client when h2c is off (transport.RefuseH2C),
// its frames read and the refusal written under the header timeout, then
// closes after the client has read it.
func refuseH2C(c net.Conn, timeout time.Duration) {
	if timeout <= 0 {
		timeout = refusalLinger
	}
	_ = c.SetDeadline(time.Now().Add(timeout))
	err := transport.RefuseH2C(c, func(b []byte) error {
		_, err := c.Write(b)
		return err
	})
	if tc, ok := c.(interface{ CloseWrite() error }); ok && err == nil && tc.CloseWrite() == nil {
		_ = c.SetReadDeadline(time.Now().Add(refusalLinger))
		_, _ = io.CopyN(io.Discard, c, refusalLingerBytes)
	}
	_ = c.Close()
}
