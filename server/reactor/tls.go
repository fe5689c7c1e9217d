//go:build linux

package reactor

import (
	"crypto/tls"
	"net"
	"time"
)

// TLS on the reactor. A TLS connection's clientConn reads and writes through
// a tls.Conn whose transport is the connection's own socket (tlsSocket), so
// waiting for bytes is the reactor's, in either mode, and the parser still
// reads only what it asks for (plus, inside crypto/tls, the rest of the
// record it is in). What crypto/tls may hold that the socket no longer
// shows is a whole record already read: before the connection goes idle,
// probe decrypts such a record without touching the socket, and the
// connection is served again at once.

// tlsSocket is the socket under a TLS connection.
type tlsSocket struct{ c *clientConn }

// wouldBlock is what tlsSocket returns while probing: temporary, so
// crypto/tls does not make it the connection's error.
type wouldBlock struct{}

func (wouldBlock) Error() string   { return "tls probe: no input" }
func (wouldBlock) Timeout() bool   { return true }
func (wouldBlock) Temporary() bool { return true }

func (s tlsSocket) Read(p []byte) (int, error) {
	c := s.c
	if c.probing {
		return 0, wouldBlock{}
	}
	if h := c.h2; h != nil {
		return h.socketRead(p)
	}
	return c.socketRead(p)
}

func (s tlsSocket) Write(p []byte) (int, error) {
	if h := s.c.h2; h != nil && !h.tlsOut {
		return h.alertWrite(p)
	}
	return s.c.socketWrite(p)
}

// Close is a no-op while the reactor serves the connection: the clientConn
// closes its socket itself (without a close_notify: HTTP/1.1 frames every
// answer, so a truncation shows). Handed to the HTTP/2 server, closing
// ends the socket's reads and writes; the clientConn closes it when the
// server returns.
func (s tlsSocket) Close() error {
	if s.c.detached {
		s.c.shutdownSocket()
	}
	return nil
}

func (s tlsSocket) LocalAddr() net.Addr {
	if s.c.nc == nil {
		return s.c.localAddr()
	}
	return s.c.nc.LocalAddr()
}

func (s tlsSocket) RemoteAddr() net.Addr {
	if s.c.nc == nil {
		return net.TCPAddrFromAddrPort(s.c.peer)
	}
	return s.c.nc.RemoteAddr()
}

// SetDeadline and SetWriteDeadline are the HTTP/2 server's, once it has
// the connection; the clientConn's own writes arm theirs per answer.
func (s tlsSocket) SetDeadline(d time.Time) error {
	if s.c.detached {
		return s.c.nc.SetDeadline(d)
	}
	return nil
}

func (s tlsSocket) SetWriteDeadline(d time.Time) error {
	if s.c.detached {
		return s.c.nc.SetWriteDeadline(d)
	}
	return nil
}

// SetReadDeadline is for a relay and the HTTP/2 server (crypto/tls sets
// none itself): the clientConn's own reads arm theirs per phase.
func (s tlsSocket) SetReadDeadline(d time.Time) error {
	c := s.c
	if c.detached {
		return c.nc.SetReadDeadline(d)
	}
	c.rdl = c.t.clockAt(d)
	return nil
}

var _ net.Conn = tlsSocket{}

// startTLS makes c a TLS connection; the handshake runs within the first
// read, under the header timeout.
func (c *clientConn) startTLS(cfg *tls.Config) {
	c.tls = tls.Server(tlsSocket{c}, cfg)
}

// socketRead reads the socket itself (under TLS: for crypto/tls).
func (c *clientConn) socketRead(p []byte) (int, error) {
	if !c.detached {
		return c.evRead(p)
	}
	return c.nc.Read(p)
}

// socketWrite writes the socket itself.
func (c *clientConn) socketWrite(p []byte) (int, error) {
	if !c.detached {
		return c.evWrite(p)
	}
	return c.nc.Write(p)
}

// readPlain reads what the parser gets: the socket's bytes, or TLS's
// plaintext (a byte a probe took first).
func (c *clientConn) readPlain(p []byte) (int, error) {
	if c.tls == nil {
		return c.socketRead(p)
	}
	if c.probed {
		c.probed = false
		p[0] = c.probe[0]
		return 1, nil
	}
	c.armHandshakeWrites()
	return c.tls.Read(p)
}

// armHandshakeWrites bounds what crypto/tls writes inside a read (the
// handshake's flight, a session ticket, an alert) by the read phase's
// deadline while no answer's write deadline is set: a client that sends
// its hello and then stops reading would otherwise hold the connection
// and its fiber or goroutine for as long as it likes once the flight
// outgrows the socket buffers.
func (c *clientConn) armHandshakeWrites() {
	if c.warmed || c.rtimeout <= 0 {
		return
	}
	c.wdl = c.rdl
}

// writePlain writes an answer's bytes, through TLS when the client uses it.
func (c *clientConn) writePlain(p []byte) (int, error) {
	if c.tls == nil {
		return c.socketWrite(p)
	}
	return c.tls.Write(p)
}

// tlsPending reports whether crypto/tls holds a request's bytes the socket
// no longer shows; it decrypts them without reading the socket and keeps
// their first byte for the next read.
func (c *clientConn) tlsPending() bool {
	if c.tls == nil || c.probed || c.rerr != nil {
		return c.probed
	}
	c.probing = true
	n, _ := c.tls.Read(c.probe[:])
	c.probing = false
	c.probed = n > 0
	return c.probed
}

// tlsHandshakeFailed reports whether a read error came from a TLS
// handshake that did not complete: nothing can be answered then.
func (c *clientConn) tlsHandshakeFailed() bool {
	return c.tls != nil && !c.tls.ConnectionState().HandshakeComplete
}
