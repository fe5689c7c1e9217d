//go:build linux

package reactor

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/internal/sockpeek"
	"github.com/tollgate/tollgate/pipeline"
)

// upConn is an upstream connection of an event loop: a non-blocking
// socket the loop watches (edge-triggered, registered once), read and
// written by the fibers running on that loop. It is a net.Conn, so the
// upstream package's pools (fasthttp.HostClient) use it as they would any
// connection; its deadlines are the loop's timers, not the runtime's.
type upConn struct {
	s   *evState
	fd  int32
	gen uint32
	io  evIO

	local, remote *net.TCPAddr

	// Deadlines on the transport clock, 0 for none: set and read by the
	// request using the connection.
	rdl, wdl int64

	// hupAt is when the loop first saw the backend hang up (transport
	// clock), 0 until then: the pool learns from it how long the backend
	// keeps an idle connection.
	hupAt atomic.Int64

	mu     sync.Mutex // orders Close against the loop's registration
	closed bool
}

// dial connects to addr on the loop; f is the fiber asking.
func (s *evState) dial(f *fiber, addr string, timeout time.Duration) (net.Conn, error) {
	deadline := s.t.now() + int64(timeout)
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		if ap, err = resolve(f, addr, timeout); err != nil {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err}
		}
	}
	remote := net.TCPAddrFromAddrPort(ap)
	fail := func(err error) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: remote, Err: err}
	}
	family, sa := syscall.AF_INET, syscall.Sockaddr(nil)
	if a := ap.Addr().Unmap(); a.Is4() {
		sa = &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: a.As4()}
	} else {
		family = syscall.AF_INET6
		sa = &syscall.SockaddrInet6{Port: int(ap.Port()), Addr: a.As16()}
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail(os.NewSyscallError("socket", err))
	}
	_ = syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
	u := &upConn{s: s, fd: int32(fd), gen: s.t.gen.Add(1), remote: remote}
	if err := s.l.addUp(u); err != nil {
		_ = syscall.Close(fd)
		return fail(err)
	}
	err = syscall.Connect(fd, sa)
	if err == syscall.EINPROGRESS || err == syscall.EINTR {
		for err = syscall.EINPROGRESS; err == syscall.EINPROGRESS; {
			if !u.io.wready.Load() {
				if werr := s.await(&u.io, u.fd, true, deadline); werr != nil {
					_ = u.Close()
					return fail(werr)
				}
			}
			var soerr int
			if soerr, err = syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_ERROR); err == nil && soerr != 0 {
				err = syscall.Errno(soerr)
			}
			if err == syscall.EINPROGRESS || err == syscall.EALREADY {
				u.io.wready.Store(false)
				err = syscall.EINPROGRESS
			}
		}
	}
	if err != nil {
		_ = u.Close()
		return fail(os.NewSyscallError("connect", err))
	}
	if lsa, err := syscall.Getsockname(fd); err == nil {
		u.local = sockaddrTCP(lsa)
	}
	return u, nil
}

// resolve finds host's address in the transport's cache, or looks it up
// off the loop (the lookup blocks).
func resolve(f *fiber, addr string, timeout time.Duration) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.AddrPort{}, err
	}
	pn, err := net.LookupPort("tcp", port)
	if err != nil {
		return netip.AddrPort{}, err
	}
	dns := f.s.t.dns
	if ip, ok := dns.cached(host, time.Now()); ok {
		return netip.AddrPortFrom(ip, uint16(pn)), nil
	}
	var ip netip.Addr
	f.Block(nil, pipeline.BlockingFunc(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		ip, err = dns.resolve(ctx, host, time.Now())
		cancel()
	}))
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(ip, uint16(pn)), nil
}

func sockaddrTCP(sa syscall.Sockaddr) *net.TCPAddr {
	switch a := sa.(type) {
	case *syscall.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]).To16(), Port: a.Port}
	case *syscall.SockaddrInet6:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}
	}
	return nil
}

// Read implements net.Conn: it reads once epoll has said there are bytes.
func (u *upConn) Read(p []byte) (int, error) {
	n, err := u.s.readFD(u.s.cur, &u.io, u.fd, p, u.rdl)
	if err != nil && err != io.EOF {
		err = u.opError("read", err)
	}
	return n, err
}

// Write implements net.Conn.
func (u *upConn) Write(p []byte) (int, error) {
	n, err := u.s.writeFD(u.s.cur, &u.io, u.fd, p, u.wdl)
	if err != nil {
		err = u.opError("write", err)
	}
	return n, err
}

func (u *upConn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: u.local, Addr: u.remote, Err: err}
}

// Close implements net.Conn. The pool may close an idle connection from
// its own goroutine; the loop then forgets the socket before it is closed.
func (u *upConn) Close() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return net.ErrClosed
	}
	u.closed = true
	u.s.l.removeUp(u)
	return sysClose(u.fd)
}

// Shutdown ends the connection's pending reads and writes (a relay's end:
// the fiber waiting on it wakes) and leaves the socket to Close.
func (u *upConn) Shutdown() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.closed {
		_ = syscall.Shutdown(int(u.fd), syscall.SHUT_RDWR)
	}
}

// Stale reports an idle connection that must not carry a request: the
// backend closed it (or it failed), or it sent bytes no request asked
// for, which the next request would read as its answer (nginx closes a
// cached connection that turns readable for the same reason). The loop's
// events say that bytes came; a look at the socket confirms it, since an
// edge can arrive late for bytes an answer's read already took.
func (u *upConn) Stale() bool {
	switch {
	case u.io.hup.Load():
		return true
	case !u.io.rready.Load():
		return false
	case sockpeek.Pending(uintptr(u.fd)):
		return true
	}
	u.io.rready.Store(false)
	return false
}

// hungUp notes the hang-up the loop saw at clock, the first one only.
func (u *upConn) hungUp(clock int64) {
	if u.hupAt.Load() == 0 {
		u.hupAt.Store(max(clock, 1))
	}
}

// HungUpAt is when the loop saw the backend hang up, zero until it did
// (the pool's hangUpClock). Unlike Stale it only reads, so the pool's
// sweep may ask from another goroutine.
func (u *upConn) HungUpAt() time.Time {
	if at := u.hupAt.Load(); at != 0 {
		return u.s.t.epoch.Add(time.Duration(at))
	}
	return time.Time{}
}

func (u *upConn) LocalAddr() net.Addr  { return u.local }
func (u *upConn) RemoteAddr() net.Addr { return u.remote }

func (u *upConn) SetDeadline(t time.Time) error {
	_ = u.SetReadDeadline(t)
	return u.SetWriteDeadline(t)
}

func (u *upConn) SetReadDeadline(t time.Time) error {
	u.rdl = u.s.t.clockAt(t)
	return nil
}

func (u *upConn) SetWriteDeadline(t time.Time) error {
	u.wdl = u.s.t.clockAt(t)
	return nil
}

// addUp starts watching an upstream connection.
func (l *epollLoop) addUp(u *upConn) error {
	return watch(l, fdOwner{up: u}, u.fd, u.gen, evArm)
}

// removeUp stops watching an upstream connection about to be closed; its
// descriptor is its socket's only one, so closing it is what takes it out
// of the epoll set.
func (l *epollLoop) removeUp(u *upConn) { unwatch(l, fdOwner{up: u}, u.fd, true) }
