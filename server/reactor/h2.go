//go:build linux

package reactor

import (
	"os"

	"bufio"
	"github.com/tollgate/tollgate/server/h2"
	"time"

	"github.com/tollgate/tollgate/server/transport"
)

// HTTP/2 on the reactor: a TLS connection whose client chose h2 by ALPN,
// once its handshake is done, and a cleartext one whose first bytes were
// the HTTP/2 preface (h2c) are served on their loop (h2conn_linux.go).
// With TOLLGATE_H2_ENGINE=xnet they leave the reactor instead for x/net's
// server (handOffH2), whose goroutines read and write the connection
// through the runtime's poller (the net.Conn it was accepted as), not the
// loop's epoll set; it stays counted among the transport's connections,
// and busy, until the HTTP/2 server is done with it.

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
// its own, which reads read0 (what the reactor read of a cleartext
// connection already) before the socket; the connection is closed, and
// stops counting as in flight, when the server returns. An error (no
// descriptor left for the net.Conn the server reads) leaves the
// connection to the caller to drop.
func (t *reactorTransport) handOffH2(c *clientConn, read0 []byte) error {
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
	conn := c.nc
	if c.tls != nil {
		conn = c.tls
	} else if len(read0) > 0 {
		conn = &transport.PrefacedConn{Conn: c.nc, Read0: read0}
	}
	go func() {
		t.o.HTTP2.ServeConn(conn, c.peer, t.h)
		c.relaying.Store(false)
		c.close()
		t.served(c, -1)
	}()
	return nil
}

// prefaced reports whether a cleartext connection opens with the HTTP/2
// client preface, reading no further than the preface needs: an
// HTTP/1.x request parts from it within its first bytes (most at the
// first), so only a client that is sending the preface is waited for, and
// under the header timeout like any request's first line. A read error
// is left in the reader for the request parser to meet.
func prefaced(br *bufio.Reader) bool {
	for want := 1; ; {
		if _, err := br.Peek(want); err != nil {
			return false
		}
		b, _ := br.Peek(br.Buffered())
		h2, more := transport.PrefaceMatch(b)
		if !more {
			return h2
		}
		want = len(b) + 1
	}
}

// serveH2C gives a cleartext connection that opened with the preface to
// the HTTP/2 server, the bytes read so far first; without one (client.h2c
// off) it refuses it (transport.RefuseH2C), then closes. It reports
// false: the connection is no longer the reactor's to serve.
func (t *reactorTransport) serveH2C(c *clientConn, w *serveState) bool {
	if t.o.HTTP2 == nil {
		// What follows the preface is read under the header timeout
		// still running.
		_, _ = w.br.Discard(len(transport.ClientPreface))
		_ = transport.RefuseH2C(w.br, func(b []byte) error {
			c.armWrite()
			if _, err := w.bw.Write(b); err != nil {
				return err
			}
			return c.flushOut()
		})
		c.linger = true
		return t.drop(c, w)
	}
	if t.h2 != nil {
		return t.serveH2(c, w)
	}
	b, _ := w.br.Peek(w.br.Buffered())
	read0 := append([]byte(nil), b...)
	if t.handOffH2(c, read0) != nil {
		return t.drop(c, w)
	}
	return false
}

// h2EngineEnv chooses how the reactor serves HTTP/2: on its loops (the
// default), or "xnet" to hand h2 connections to x/net's server on
// goroutines of their own, as releases before the loops' engine did.
const h2EngineEnv = "TOLLGATE_H2_ENGINE"

// loopH2 is the HTTP/2 server whose limits the loops serve h2 with, nil
// when h2 is not offered, is not the gateway's own server, or the
// operator chose x/net's engine.
func loopH2(cs transport.ConnServer) *h2.Server {
	s, ok := cs.(*h2.Server)
	if !ok || s == nil || os.Getenv(h2EngineEnv) == "xnet" {
		return nil
	}
	return s
}
