//go:build linux

package reactor

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/codec"
)

// clientConn is the state of one client connection on the reactor, allocated
// once when the connection is accepted. While a request is being served it
// is the io.Reader/io.Writer the pooled bufio reader and writer wrap: reads
// go to the socket only when the reader needs bytes, so what a connection
// holds is bounded by the reader's size, whatever the client sends.
type clientConn struct {
	t *reactorTransport
	// nc is the connection as the runtime's poller knows it; nil for a
	// socket a loop accepted (acceptFD), which is the bare fd until the
	// HTTP/2 server needs a net.Conn (netConn).
	nc   net.Conn
	rc   syscall.RawConn
	loop *epollLoop
	fd   int32
	gen  uint32 // tells this connection's events from those of an fd's earlier owner
	peer netip.AddrPort

	state    atomic.Int32 // connIdle, connBusy, connClosed
	relaying atomic.Bool  // relaying a switched protocol (upgrade.go)
	last     atomic.Int64 // transport clock at the last activity
	used     atomic.Bool  // a request has been read

	// mu orders closing the connection against looking at its socket
	// (inputWaiting, shutdownSocket), so that neither reaches an fd that
	// was closed and reused.
	mu     sync.Mutex
	closed bool

	// Used only by the goroutine serving the connection.
	bw       *bufio.Writer
	pending  bool             // answers written but not flushed
	rtimeout time.Duration    // read timeout of the current phase (header, body)
	rarmed   bool             // the read deadline for this phase is set
	warmed   bool             // the write deadline for this answer is set
	rerr     error            // first read error; sticky
	werr     error            // first write error; sticky
	body     codec.Body       // the streamed body of the current request
	hdr      codec.HeaderEnd  // how the header section being read ends
	inHeader bool             // a header section is being read
	linger   bool             // close gracefully: the client may still be sending
	peekN    int              // what peek saw; guarded by mu
	peekFn   func(fd uintptr) // c.peek, bound once

	// The loop's view (see scheduler_linux.go): the socket's readiness, the
	// fiber serving the connection, and the current read and write
	// deadlines on the transport clock (0 for none).
	io       evIO
	fiber    *fiber
	rdl, wdl int64

	// TLS (tls.go): the session, and a first byte of plaintext a probe
	// took before the connection would have gone idle.
	tls     *tls.Conn
	probing bool
	probed  bool
	probe   [1]byte

	// HTTP/2 (h2.go): the connection was handed to the HTTP/2 server,
	// and its socket is read through the runtime's poller from then on;
	// or it is served on its loop (h2conn_linux.go).
	detached bool
	h2       *h2Conn
}

// evIO is the readiness of one socket as the loop's edge-triggered events
// report it, and the fibers waiting for it: one to read and one to write
// (a relay reads a socket on one fiber while it writes it on another).
type evIO struct {
	rready  atomic.Bool // bytes (or EOF) may be waiting: a read will not fail with EAGAIN
	wready  atomic.Bool // the send buffer had room at the last event
	hup     atomic.Bool // the peer hung up, or the socket failed: every read is ready
	rwaiter *fiber      // loop goroutine and that fiber only
	wwaiter *fiber
}

// waited reports a fiber waiting on the socket.
func (io *evIO) waited() bool { return io.rwaiter != nil || io.wwaiter != nil }

func (io *evIO) readable() bool { return io.rready.Load() || io.hup.Load() }

// Read gives what the socket has, waiting for at least one byte under the
// phase's deadline. Before it waits it sends answers still held for
// pipelined requests, so a client waiting for them is not stalled.
func (c *clientConn) Read(p []byte) (int, error) {
	if c.rerr != nil {
		return 0, c.rerr
	}
	if len(p) == 0 {
		return 0, nil
	}
	if c.inHeader && c.hdr.Bad() {
		// The section has ended, not with CRLF CRLF, and the parser asks
		// for more: it would wait for one until the header timeout.
		c.rerr = codec.ErrBareLFEnd
		return 0, c.rerr
	}
	if c.pending {
		if err := c.flushOut(); err != nil {
			c.rerr = err
			return 0, err
		}
	}
	c.armReadDeadline()
	n, err := c.readPlain(p)
	if c.inHeader && n > 0 {
		c.hdr.Feed(p[:n])
	}
	if err != nil {
		c.rerr = readError(err)
		return n, c.rerr
	}
	return n, nil
}

// Write sends p, under the answer's write deadline, set at its first write.
func (c *clientConn) Write(p []byte) (int, error) {
	if c.werr != nil {
		return 0, c.werr
	}
	c.armWriteDeadline()
	n, err := c.writePlain(p)
	if err != nil {
		c.werr = err
	}
	return n, err
}

// armReadDeadline sets the read phase's deadline at its first read of
// the socket.
func (c *clientConn) armReadDeadline() {
	if c.rarmed {
		return
	}
	c.rarmed = true
	c.rdl = 0
	if c.rtimeout > 0 {
		c.rdl = c.loop.ev.clock + int64(c.rtimeout)
	}
}

// LimitReads implements codec.ReadLimiter: the current read phase ends at
// t if its own deadline is later (a streamed body's exchange budget).
func (c *clientConn) LimitReads(t time.Time) {
	c.armReadDeadline()
	if at := c.t.clockAt(t); c.rdl == 0 || at < c.rdl {
		c.rdl = at
	}
}

// armWriteDeadline sets the answer's write deadline at its first write.
func (c *clientConn) armWriteDeadline() {
	if c.warmed {
		return
	}
	c.warmed = true
	c.wdl = 0
	if d := c.t.o.WriteTimeout; d > 0 {
		c.wdl = c.loop.ev.clock + int64(d)
	}
}

// flushOut sends everything written so far.
func (c *clientConn) flushOut() error {
	c.pending = false
	if c.bw != nil && c.bw.Buffered() > 0 {
		if err := c.bw.Flush(); err != nil {
			return err
		}
	}
	c.warmed = false
	return c.werr
}

// readPhase starts a read phase (header, body) bounded by d from its first
// read of the socket.
func (c *clientConn) readPhase(d time.Duration) {
	c.rtimeout, c.rarmed = d, false
}

// armWrite starts the write timeout of a new answer.
func (c *clientConn) armWrite() { c.warmed = false }

// idle hands the connection back to its loop after a request, which
// watched it all along: input that came meanwhile is the loop's to serve
// once the fiber is done. It reports false if the connection is gone
// instead.
func (c *clientConn) idle() bool {
	c.last.Store(c.t.clock.Load())
	c.state.Store(connIdle)
	if c.t.shut.Load() {
		// Draining: a request already waiting is answered (with
		// Connection: close), not dropped with the connection.
		if c.inputWaiting() {
			c.t.dispatch(c)
			return false
		}
		c.closeIfIdle()
		return false
	}
	return true
}

// closeIfIdle closes the connection unless a request is being served on it.
func (c *clientConn) closeIfIdle() {
	if c.state.CompareAndSwap(connIdle, connClosed) {
		c.close()
	}
}

// close releases the connection once. Only the goroutine serving it, or
// whoever moved it from idle to closed, calls it.
func (c *clientConn) close() {
	c.state.Store(connClosed)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	if c.nc == nil {
		// Closing the only descriptor of a socket takes it out of every
		// epoll set: no epoll_ctl needed.
		c.loop.forget(c)
	} else {
		c.loop.remove(c)
	}
	c.closeSocket()
	c.mu.Unlock()
	c.loop.live.Add(-1)
	t := c.t
	t.mu.Lock()
	delete(t.live, c)
	t.mu.Unlock()
	t.conns.Add(-1)
}

// closeSocket closes the connection's descriptors: nc, and c.fd when the
// connection came from a loop's accept (no RawConn then: c.fd is its own,
// not nc's).
func (c *clientConn) closeSocket() {
	if c.nc != nil {
		_ = c.nc.Close()
	}
	if c.rc == nil && c.fd >= 0 {
		_ = sysClose(c.fd)
	}
}

// Lingering close, after an answer the client may not have read yet while
// it still sends: closing a socket with unread input makes the kernel reset
// the connection, and a reset can destroy the answer in the client's
// buffer before it reads it.
const (
	lingerTime  = time.Second // longest wait for the client to stop sending
	lingerBytes = 1 << 20     // most bytes read and dropped meanwhile
)

// finish closes the connection from the goroutine serving it. Unless the
// client has already gone, when input is waiting or was left unread it
// first ends the answer with a FIN and reads and drops what comes for a
// while.
func (c *clientConn) finish() {
	if !isGone(c.rerr) && c.werr == nil && (c.linger || c.inputWaiting()) && c.closeWrite() == nil {
		c.evLinger()
	}
	c.close()
}

// closeWrite sends a FIN (the serving goroutine only: the socket is open).
func (c *clientConn) closeWrite() error {
	if c.nc == nil {
		return sysShutdown(c.fd, syscall.SHUT_WR)
	}
	if tc, ok := c.nc.(interface{ CloseWrite() error }); ok {
		return tc.CloseWrite()
	}
	return errors.ErrUnsupported
}

// inputWaiting reports whether unread bytes wait in the socket, without
// reading or blocking. While draining, Shutdown's sweep and the goroutine
// that just served the connection may both ask: the lock keeps their peeks
// apart and off a socket already closed.
func (c *clientConn) inputWaiting() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.peekN = 0
	switch {
	case c.closed:
		return false
	case c.nc == nil:
		c.peek(uintptr(c.fd))
	case c.rc == nil || c.rc.Control(c.peekFn) != nil:
		return false
	}
	return c.peekN > 0
}

func (c *clientConn) peek(fd uintptr) {
	c.peekN = sysPeek(int32(fd))
}

// isGone reports a read error after which nothing can reach the client.
func isGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// readError maps the socket's read errors to the ones fasthttp and the
// handler understand; timeouts stay net.Errors (answered 408).
func readError(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return net.ErrClosed
	}
	return err
}
