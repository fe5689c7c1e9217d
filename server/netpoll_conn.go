package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/cloudwego/netpoll"
)

// npConn is the state of one client connection on the netpoll transport,
// allocated once when the connection is accepted. It is also the context
// netpoll hands to OnRequest, and the io.Reader/io.Writer the pooled bufio
// reader and writer wrap while a request is served.
type npConn struct {
	context.Context

	t    *netpollTransport
	conn netpoll.Connection
	rd   netpoll.Reader
	wr   netpoll.Writer
	peer netip.AddrPort

	state atomic.Int32 // npIdle, npBusy, npClosed
	last  atomic.Int64 // transport clock at the last activity
	used  atomic.Bool  // a request has been read

	counted bool // admitted under MaxConns; set before registration

	// Used only by the OnRequest call that holds the connection.
	bw       *bufio.Writer
	pending  bool          // answers written but not flushed
	rtimeout time.Duration // read timeout of the current phase (header, body)
	rarmed   bool          // the read deadline for this phase is set
	warmed   bool          // the write deadline for this answer is set
	rerr     error         // first read error; sticky
	werr     error         // first write error; sticky
	body     npBody        // the streamed body of the current request
}

// Read gives what netpoll has buffered, waiting for at least one byte under
// the connection's read deadline. Before it waits it sends answers still
// held for pipelined requests, so a client waiting for them is not stalled.
func (c *npConn) Read(p []byte) (int, error) {
	if c.rerr != nil {
		return 0, c.rerr
	}
	if len(p) == 0 {
		return 0, nil
	}
	n := c.rd.Len()
	if n == 0 {
		if c.pending {
			if err := c.flushOut(); err != nil {
				c.rerr = err
				return 0, err
			}
		}
		if !c.rarmed {
			// The phase's deadline is set when it first has to wait: a
			// request that arrived whole costs no clock reading.
			c.rarmed = true
			if c.rtimeout > 0 {
				_ = c.conn.SetReadDeadline(time.Now().Add(c.rtimeout))
			} else {
				_ = c.conn.SetReadDeadline(time.Time{})
			}
		}
		if _, err := c.rd.Peek(1); err != nil {
			c.rerr = npReadError(err)
			return 0, c.rerr
		}
		n = c.rd.Len()
	}
	n = min(n, len(p))
	b, err := c.rd.Next(n)
	if err != nil {
		c.rerr = npReadError(err)
		return 0, c.rerr
	}
	copy(p, b)
	_ = c.rd.Release()
	return n, nil
}

// Write copies p into the connection's output buffer; it sends when a batch
// has grown large. flushOut sends the rest.
func (c *npConn) Write(p []byte) (int, error) {
	if c.werr != nil {
		return 0, c.werr
	}
	written := 0
	for len(p) > 0 {
		n := min(len(p), npFlushBytes)
		buf, err := c.wr.Malloc(n)
		if err != nil {
			c.werr = err
			return written, err
		}
		copy(buf, p[:n])
		written += n
		p = p[n:]
		if c.wr.MallocLen() >= npFlushBytes {
			if err := c.send(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// flushOut sends everything written so far.
func (c *npConn) flushOut() error {
	c.pending = false
	if c.bw != nil && c.bw.Buffered() > 0 {
		if err := c.bw.Flush(); err != nil {
			return err
		}
	}
	if c.werr != nil {
		return c.werr
	}
	if c.wr.MallocLen() > 0 {
		if err := c.send(); err != nil {
			return err
		}
	}
	c.warmed = false
	return nil
}

// send hands the output buffer to the socket, waiting while it is full up
// to the write deadline, which is set at the first send of an answer.
func (c *npConn) send() error {
	if !c.warmed {
		c.warmed = true
		if d := c.t.o.WriteTimeout; d > 0 {
			_ = c.conn.SetWriteDeadline(time.Now().Add(d))
		}
	}
	if err := c.wr.Flush(); err != nil {
		c.werr = err
		return err
	}
	return nil
}

// readPhase starts a read phase (header, body) bounded by d from the
// moment it first has to wait for the client.
func (c *npConn) readPhase(d time.Duration) {
	c.rtimeout, c.rarmed = d, false
}

// armWrite starts the write timeout of a new answer.
func (c *npConn) armWrite() { c.warmed = false }

// closeIfIdle closes the connection unless a request is being served on it
// or input is waiting for one.
func (c *npConn) closeIfIdle() {
	if c.rd.Len() == 0 && c.state.CompareAndSwap(npIdle, npClosed) {
		_ = c.conn.Close()
	}
}

// onClose runs once when netpoll releases the connection.
func (c *npConn) onClose(netpoll.Connection) error {
	c.state.Store(npClosed)
	if c.counted {
		t := c.t
		t.mu.Lock()
		delete(t.live, c)
		t.mu.Unlock()
		t.conns.Add(-1)
	}
	return nil
}

// npReadError maps netpoll's read errors to the ones fasthttp and the
// handler understand; timeouts stay net.Errors (answered 408).
func npReadError(err error) error {
	switch {
	case errors.Is(err, netpoll.ErrEOF):
		return io.EOF
	case errors.Is(err, netpoll.ErrConnClosed):
		return net.ErrClosed
	}
	return err
}
