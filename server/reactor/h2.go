//go:build linux

package reactor

import (
	"time"
)

// HTTP/2 on the reactor. A TLS connection whose client chose h2 by ALPN
// leaves the reactor once its handshake is done: its multiplexed streams
// need a reader that is always waiting for frames and answers written
// while other streams are read, which is what the HTTP/2 server's own
// goroutines do. From the hand-off the connection's socket is read and
// written through the runtime's poller (the net.Conn it was accepted as),
// not the loop's epoll set; it stays counted among the transport's
// connections, and busy, until the HTTP/2 server is done with it.

// handshakeForH2 completes the TLS handshake under the header timeout
// and reports whether the client chose h2. It runs before the first
// request is read, only when the transport serves h2.
func (t *reactorTransport) handshakeForH2(c *clientConn) (h2 bool, err error) {
	c.readPhase(t.o.HeaderTimeout)
	c.armReadDeadline()
	c.armWrite()
	c.armWriteDeadline()
	if err := c.tls.Handshake(); err != nil {
		c.rerr = err
		return false, err
	}
	c.armWrite()
	return c.tls.ConnectionState().NegotiatedProtocol == "h2", nil
}

// handOffH2 gives the connection to the HTTP/2 server, on a goroutine of
// its own; the connection is closed, and stops counting as in flight,
// when the server returns. An error (no descriptor left for the net.Conn
// the server reads) leaves the connection to the caller to drop.
func (t *reactorTransport) handOffH2(c *clientConn) error {
	if err := c.netConn(); err != nil {
		return err
	}
	c.loop.remove(c)
	c.rdl, c.wdl = 0, 0
	c.detached = true
	_ = c.nc.SetDeadline(time.Time{})
	// Shut with the transport if the HTTP/2 server's own shutdown ran
	// out of time (stop ends relays the same way).
	c.relaying.Store(true)
	go func() {
		t.o.HTTP2.ServeConn(c.tls, c.peer, t.h)
		c.relaying.Store(false)
		c.close()
		t.served(c, -1)
	}()
	return nil
}
