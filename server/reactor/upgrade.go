//go:build linux

package reactor

import (
	"syscall"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/server/transport"
)

// switchProtocols writes the 101 answer, then relays the connection and
// the backend's both ways (transport.Relay) on the goroutine or fiber that
// served the request, with a second one for the other direction. The
// connection closes afterwards; it reports false for serveOne.
func (t *reactorTransport) switchProtocols(c *clientConn, w *serveState, up *pipeline.Upgrade) bool {
	resp := &w.resp
	c.armWrite()
	err := resp.Write(w.bw)
	pipeline.Release(w.ctx)
	w.req.Reset()
	resp.Reset()
	if err == nil {
		err = c.flushOut()
	}
	if err != nil {
		_ = up.Conn.Close()
		return false
	}
	// What the client sent right behind its handshake is the start of
	// the new protocol.
	var early []byte
	if n := w.br.Buffered(); n > 0 {
		b, _ := w.br.Peek(n)
		early = append(early, b...)
		_, _ = w.br.Discard(n)
	}
	var client transport.Endpoint = tlsSocket{c}
	if c.tls != nil {
		client = c.tls
	}
	// The answer's write deadline is over; the relay's writes wait as
	// long as the other side keeps the relay alive.
	c.wdl = 0
	c.relaying.Store(true)
	transport.Relay(client, up.Conn, early, up, c.fiber.spawn, func() {
		c.shutdownSocket()
		transport.Shutdown(up.Conn)
	})
	c.relaying.Store(false)
	_ = up.Conn.Close()
	c.linger = false
	return false
}

// shutdownSocket ends the client socket's pending reads and writes
// without closing it.
func (c *clientConn) shutdownSocket() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	_ = syscall.Shutdown(int(c.fd), syscall.SHUT_RDWR)
}
