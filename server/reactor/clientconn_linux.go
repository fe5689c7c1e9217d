//go:build linux

package reactor

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"github.com/tollgate/tollgate/internal/uring"
)

// evRead reads the client's socket on its loop: once epoll has
// said there are bytes, waiting on the loop (under the phase's deadline)
// otherwise. The waiting fiber is the one running: the connection's own,
// or a relay's second one.
func (c *clientConn) evRead(p []byte) (int, error) {
	n, err := c.loop.ev.readFD(c.loop.ev.cur, &c.io, c.fd, p, c.rdl)
	if err != nil && err != io.EOF {
		err = &net.OpError{Op: "read", Net: "tcp", Err: err}
	}
	return n, err
}

// evWrite writes all of p to the client's socket on its loop,
// waiting on the loop (under the answer's deadline) while it is full.
func (c *clientConn) evWrite(p []byte) (int, error) {
	n, err := c.loop.ev.writeFD(c.loop.ev.cur, &c.io, c.fd, p, c.wdl)
	if err != nil {
		err = &net.OpError{Op: "write", Net: "tcp", Err: err}
	}
	return n, err
}

// readFD reads fd, a socket of the loop, once epoll has said there are
// bytes (or EOF), parking fiber f until then or the deadline.
func (s *evState) readFD(f *fiber, r *evIO, fd int32, p []byte, deadline int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if !r.readable() {
			if err := s.awaitFor(f, r, fd, false, deadline); err != nil {
				return 0, err
			}
		}
		n, err := s.sockCall(f, uring.OpRecv, fd, p)
		switch {
		case err == syscall.EAGAIN:
			r.rready.Store(false)
			continue
		case err == syscall.EINTR:
			continue
		case err != nil:
			return 0, os.NewSyscallError("read", err)
		case n == 0:
			return 0, io.EOF
		}
		if n < len(p) {
			// Drained: the next bytes come with a new edge.
			r.rready.Store(false)
		}
		return n, nil
	}
}

// writeFD writes all of p to fd, a socket of the loop, parking fiber f
// while the send buffer is full, until the deadline.
func (s *evState) writeFD(f *fiber, r *evIO, fd int32, p []byte, deadline int64) (int, error) {
	done := 0
	for done < len(p) {
		n, err := s.sockCall(f, uring.OpSend, fd, p[done:])
		if n > 0 {
			done += n
		}
		switch {
		case err == syscall.EAGAIN:
			r.wready.Store(false)
			if err := s.awaitFor(f, r, fd, true, deadline); err != nil {
				return done, err
			}
		case err == syscall.EINTR:
		case err != nil:
			return done, os.NewSyscallError("write", err)
		}
	}
	return done, nil
}

var lingerBufs = sync.Pool{New: func() any { return new([4096]byte) }}

// evLinger reads and drops what the client still sends, for a while
// (see finish).
func (c *clientConn) evLinger() {
	c.rdl = c.t.now() + int64(lingerTime)
	// From a pool, not this frame: a read the loop makes in a batch needs
	// its buffer on the heap (sockCall).
	bp := lingerBufs.Get().(*[4096]byte)
	defer lingerBufs.Put(bp)
	buf := bp[:]
	for left := lingerBytes; left > 0; {
		n, err := c.evRead(buf[:min(len(buf), left)])
		left -= n
		if err != nil {
			return
		}
	}
}

// sockRecv and sockSend are recv(2) and send(2) on a non-blocking socket,
// made without telling the runtime: they never block, and a syscall the
// runtime knows of lets its monitor hand the loop's P to another thread
// whenever one takes over 20 µs (a loopback send that runs the receiver's
// TCP path does), which costs a thread wake-up and a context switch on
// both sides. They go to the socket directly: read(2) and write(2) pass
// through the file layer first (the position lock, the permission and
// notification hooks, the iterator wrappers): the syscall layer was
// 5.1 % of the loop's perf samples under wrk through read and write, and
// is 3.1 % through recvfrom and sendto (bench/RESULTS.md, "socket calls
// without the file layer").
func sockRecv(fd int32, p []byte) (int, error) {
	r, _, errno := syscall.RawSyscall6(syscall.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)), 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

func sockSend(fd int32, p []byte) (int, error) {
	r, _, errno := syscall.RawSyscall6(syscall.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)), syscall.MSG_NOSIGNAL, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}
