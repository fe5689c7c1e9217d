//go:build linux

package netpoll

import (
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// loopListener is a listening socket the event loops accept from
// themselves: it is in every loop's epoll set (EPOLLEXCLUSIVE, so one
// loop wakes per connection). An acceptor goroutine waits in the
// runtime's poller, which the loops leave unwatched while they are busy or
// in their own waits: new connections then waited for the runtime's
// monitor (under wrk, from connect to first answer byte: 1.75 ms median and
// 7.3 ms at most before the loops' own waits, bench/newconn.sh; 7 ms median
// with them).
type loopListener struct {
	t    *netpollTransport
	ln   net.Listener
	rc   syscall.RawConn
	fd   int32
	gen  uint32
	once sync.Once
	done chan struct{} // closed when the loops stopped accepting from it

	mu      sync.Mutex
	stopped bool
}

// listenOnLoops registers ln with every loop; false when ln has no file
// descriptor to watch (the caller then accepts on a goroutine).
func (t *netpollTransport) listenOnLoops(ln net.Listener) (*loopListener, bool) {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, false
	}
	fd := int32(-1)
	if rc.Control(func(f uintptr) { fd = int32(f) }) != nil || fd < 0 {
		return nil, false
	}
	ll := &loopListener{t: t, ln: ln, rc: rc, fd: fd, gen: t.gen.Add(1), done: make(chan struct{})}
	t.mu.Lock()
	loops := t.loops
	t.mu.Unlock()
	for i, l := range loops {
		if err := l.addListener(ll); err != nil {
			for _, l := range loops[:i] {
				l.removeListener(ll)
			}
			return nil, false
		}
	}
	return ll, true
}

// stop ends accepting from ll on every loop and closes its listener.
func (ll *loopListener) stop() {
	ll.once.Do(func() {
		ll.mu.Lock()
		ll.stopped = true
		ll.mu.Unlock()
		ll.t.mu.Lock()
		loops := ll.t.loops
		ll.t.mu.Unlock()
		for _, l := range loops {
			l.removeListener(ll)
		}
		_ = ll.ln.Close()
		close(ll.done)
	})
}

// addListener starts watching a listening socket.
func (l *npLoop) addListener(ll *loopListener) error {
	return watch(l, l.lns, ll, ll.fd, ll.gen, syscall.EPOLLIN|unix.EPOLLEXCLUSIVE)
}

// removeListener stops watching a listening socket.
func (l *npLoop) removeListener(ll *loopListener) { unwatch(l, l.lns, ll, ll.fd) }

// acceptFrom takes the connections waiting on ll (loop only), a bounded
// number per event: the listener is level-triggered, so the rest wake a
// loop again.
func (l *npLoop) acceptFrom(ll *loopListener) {
	for range 32 {
		var nfd int
		var err error
		// A listener's RawConn has Control only (Read is EINVAL); Control
		// holds the fd open meanwhile.
		if rerr := ll.rc.Control(func(fd uintptr) {
			// Blocking, as net.FileConn wants it: it puts a non-blocking
			// copy in the runtime's poller.
			nfd, _, err = syscall.Accept4(int(fd), syscall.SOCK_CLOEXEC)
		}); rerr != nil {
			l.removeListener(ll) // closed
			return
		}
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
		// net.FileConn takes a second descriptor for a moment (it dups):
		// with exactly one free, the connection is accepted and then
		// dropped, and the loop pauses as for a failed accept.
		f := os.NewFile(uintptr(nfd), "")
		nc, err := net.FileConn(f)
		_ = f.Close()
		if err != nil {
			l.pauseListener(ll)
			return
		}
		ll.t.accept(nc)
	}
}

// pauseListener stops watching ll for a moment after an accept error.
func (l *npLoop) pauseListener(ll *loopListener) {
	l.removeListener(ll)
	time.AfterFunc(npAcceptPause, func() {
		ll.mu.Lock()
		defer ll.mu.Unlock()
		if !ll.stopped {
			_ = l.addListener(ll)
		}
	})
}

// npAcceptPause is how long a loop leaves a listener alone after an
// accept error such as running out of file descriptors.
const npAcceptPause = 50 * time.Millisecond
