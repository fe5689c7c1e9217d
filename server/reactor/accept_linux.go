//go:build linux

package reactor

import (
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// loopListener is a listening socket the event loops accept from
// themselves: it is in every loop's epoll set (EPOLLEXCLUSIVE, so one
// loop wakes per connection). An acceptor goroutine would wait in the
// runtime's poller, which the loops leave unwatched while they are busy or
// in their own waits: new connections then waited for the runtime's
// monitor (under wrk, from connect to first answer byte: 1.75 ms median and
// 7.3 ms at most before the loops' own waits, bench/newconn.sh; 7 ms median
// with them).
//
// The loops watch a descriptor of their own for the socket, and the
// net.Listener it came from is closed, which takes the socket out of the
// runtime's poller too. Left there, every new connection also woke the
// thread waiting in the runtime's poller (for the admin listener, say),
// to find no goroutine waiting for it: with a connection per request and
// 2 workers that was half of the gateway's context switches, 1.33 per
// connection against 0.64 without it and nginx's 0.51 (bench/RESULTS.md,
// "The listener out of the runtime's poller").
type loopListener struct {
	t    *reactorTransport
	gen  uint32
	once sync.Once
	done chan struct{} // closed when the loops stopped accepting from it

	// mu guards fd's life: accepting and shrinking the queue read-lock it
	// and find it open unless stopped; stop closes it under the write lock.
	mu      sync.RWMutex
	fd      int32
	stopped bool
}

// listenOnLoops registers ln with every loop; false when ln is not a TCP
// listener with a descriptor to take (the caller then accepts on a
// goroutine).
func (t *reactorTransport) listenOnLoops(ln net.Listener) (*loopListener, bool) {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return nil, false
	}
	rc, err := tl.SyscallConn()
	if err != nil {
		return nil, false
	}
	fd := int32(-1)
	if rc.Control(func(f uintptr) { fd = sysDupCloexec(f) }) != nil || fd < 0 {
		return nil, false
	}
	// The duplicate shares the socket and its flags (non-blocking);
	// closing the original leaves the runtime's poller.
	_ = tl.Close()
	ll := &loopListener{t: t, fd: fd, gen: t.gen.Add(1), done: make(chan struct{})}
	t.mu.Lock()
	loops := t.loops
	t.mu.Unlock()
	for i, l := range loops {
		if err := l.addListener(ll); err != nil {
			for _, l := range loops[:i] {
				l.removeListener(ll)
			}
			_ = sysClose(fd)
			return nil, false
		}
	}
	return ll, true
}

// stop ends accepting from ll on every loop and closes its socket.
func (ll *loopListener) stop() {
	ll.once.Do(func() {
		ll.mu.Lock()
		ll.stopped = true
		ll.t.mu.Lock()
		loops := ll.t.loops
		ll.t.mu.Unlock()
		for _, l := range loops {
			l.removeListener(ll)
		}
		_ = sysClose(ll.fd)
		ll.mu.Unlock()
		close(ll.done)
	})
}

// shrinkBacklog empties the queue of connections the kernel completes for
// ll (see shrinkBacklog).
func (ll *loopListener) shrinkBacklog() {
	ll.mu.RLock()
	defer ll.mu.RUnlock()
	if !ll.stopped {
		_ = syscall.Listen(int(ll.fd), 0)
	}
}

// addListener starts watching a listening socket.
func (l *epollLoop) addListener(ll *loopListener) error {
	return watch(l, fdOwner{ln: ll}, ll.fd, ll.gen, syscall.EPOLLIN|unix.EPOLLEXCLUSIVE)
}

// removeListener stops watching a listening socket.
func (l *epollLoop) removeListener(ll *loopListener) { unwatch(l, fdOwner{ln: ll}, ll.fd, false) }

// acceptFrom takes the connections waiting on ll (loop only), a bounded
// number per event: the listener is level-triggered, so the rest wake a
// loop again. A connection accepted here stays a bare descriptor, never
// registered with the runtime's poller (acceptFD).
func (l *epollLoop) acceptFrom(ll *loopListener) {
	ll.mu.RLock()
	defer ll.mu.RUnlock()
	if ll.stopped {
		return
	}
	for range 32 {
		nfd, peer, err := sysAccept(uintptr(ll.fd))
		switch err {
		case nil:
		case syscall.EAGAIN:
			return
		case syscall.EINTR, syscall.ECONNABORTED:
			continue
		default:
			// Out of file descriptors and the like: this loop leaves the
			// listener alone for a while rather than spin on it.
			l.pauseListener(ll)
			return
		}
		ll.t.acceptFD(nfd, peer, l)
	}
}

// pauseListener stops watching ll for a moment after an accept error
// (ll.mu read-locked).
func (l *epollLoop) pauseListener(ll *loopListener) {
	l.removeListener(ll)
	time.AfterFunc(acceptPause, func() {
		ll.mu.RLock()
		defer ll.mu.RUnlock()
		if !ll.stopped {
			_ = l.addListener(ll)
		}
	})
}

// acceptPause is how long a loop leaves a listener alone after an
// accept error such as running out of file descriptors.
const acceptPause = 50 * time.Millisecond

// acceptFD is accept for a socket an event loop accepted itself: it stays
// a bare non-blocking descriptor that only the loops watch. Made a net.Conn
// (net.FileConn) it cost fourteen more syscalls per connection — a dup and
// its close, flag reads and writes, the runtime poller's registration and
// removal, four socket options for TCP keep-alive, three address and type
// lookups — and needed a second descriptor for a moment, so that at the
// descriptor limit a connection was accepted and then dropped. Only a
// connection handed to the HTTP/2 server gets a net.Conn (netConn).
func (t *reactorTransport) acceptFD(fd int32, peer netip.AddrPort, accepting *epollLoop) {
	if !t.admit() {
		_ = sysClose(fd)
		return
	}
	// Answers go out whole, and a pipelined or streamed one must not wait
	// for the ACK of the last (Nagle's algorithm), as net.TCPConn has it.
	sysNoDelay(fd)
	t.adopt(&clientConn{t: t, peer: peer, fd: fd}, accepting)
}

// localAddr is the address a bare socket was accepted on.
func (c *clientConn) localAddr() net.Addr {
	if sa, err := syscall.Getsockname(int(c.fd)); err == nil {
		if a := sockaddrTCP(sa); a != nil {
			return a
		}
	}
	return &net.TCPAddr{}
}

// netConn gives a bare socket (acceptFD) the net.Conn the HTTP/2 server
// reads and writes through the runtime's poller, on a descriptor of its
// own; c.fd stays open beside it until close. Only the goroutine serving c
// calls it, before handing the connection over.
func (c *clientConn) netConn() error {
	if c.nc != nil {
		return nil
	}
	dup, err := unix.FcntlInt(uintptr(c.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("fcntl", err)
	}
	f := os.NewFile(uintptr(dup), "")
	nc, err := net.FileConn(f) // a copy of its own
	_ = f.Close()
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.nc = nc
	c.mu.Unlock()
	return nil
}
