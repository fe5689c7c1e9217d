//go:build linux

package netpoll

import (
	"io"
	"net"
	"os"
	"syscall"
)

// evRead reads the client's socket in event-loop mode: once epoll has
// said there are bytes, waiting on the loop (under the phase's deadline)
// otherwise.
func (c *npConn) evRead(p []byte) (int, error) {
	for {
		if !c.io.readable() {
			if err := c.loop.ev.awaitFor(c.fiber, &c.io, c.fd, false, c.rdl); err != nil {
				return 0, &net.OpError{Op: "read", Net: "tcp", Err: err}
			}
		}
		n, err := syscall.Read(int(c.fd), p)
		switch {
		case err == syscall.EAGAIN:
			c.io.rready.Store(false)
			continue
		case err == syscall.EINTR:
			continue
		case err != nil:
			return 0, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", err)}
		case n == 0:
			return 0, io.EOF
		}
		if n < len(p) {
			c.io.rready.Store(false)
		}
		return n, nil
	}
}

// evWrite writes all of p to the client's socket in event-loop mode,
// waiting on the loop (under the answer's deadline) while it is full.
func (c *npConn) evWrite(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, err := syscall.Write(int(c.fd), p[done:])
		if n > 0 {
			done += n
		}
		switch {
		case err == syscall.EAGAIN:
			c.io.wready.Store(false)
			if err := c.loop.ev.awaitFor(c.fiber, &c.io, c.fd, true, c.wdl); err != nil {
				return done, &net.OpError{Op: "write", Net: "tcp", Err: err}
			}
		case err == syscall.EINTR:
		case err != nil:
			return done, &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", err)}
		}
	}
	return done, nil
}

// evLinger reads and drops what the client still sends, for a while
// (see finish).
func (c *npConn) evLinger() {
	c.rdl = c.t.now() + int64(npLingerTime)
	var buf [4096]byte
	for left := npLingerBytes; left > 0; {
		n, err := c.evRead(buf[:min(len(buf), left)])
		left -= n
		if err != nil {
			return
		}
	}
}
