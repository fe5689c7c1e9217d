//go:build linux

package reactor

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/tollgate/tollgate/internal/stripe"
)

// epollLoop is one epoll instance of the reactor, one per worker: it
// watches its client connections, the upstream connections its requests
// dialed and the listening sockets it accepts from, and runs the requests
// on fibers (scheduler_linux.go). Nothing reads a socket ahead of the
// parser: bytes a client sends while its connection is busy stay in the
// kernel's socket buffer, whose window then closes, until the fiber
// serving the connection asks for them through its bounded bufio.Reader.
// How it waits for events is waitEvents'.
type epollLoop struct {
	_    stripe.Pad // one loop writes it: no line shared with a neighbour
	id   int        // index among the transport's loops
	epfd int
	wake int      // eventfd: a write stops run
	ep   *os.File // epfd, registered with the runtime's poller (park)
	rc   syscall.RawConn

	events    []syscall.EpollEvent
	n         int
	wait      func(fd uintptr) bool // l.poll, bound once
	parkUntil int64                 // the epoll fd's read deadline (park)
	single    bool                  // the transport's only loop
	idle      bool                  // the last wait ran out with no event: the next one may be long (waitEvents)

	mu sync.RWMutex // writers: watch, unwatch, closing; readers: walks of owners
	// owners: the client and upstream connections and listening sockets
	// watched, by fd; an event also carries its owner's generation.
	owners fdTable
	live   atomic.Int32  // client connections given to the loop and not closed
	closed bool          // epfd and wake are closed
	done   chan struct{} // closed when run returns

	// ev is the state of the requests the loop runs on fibers (see
	// scheduler_linux.go).
	ev *evState
	_  stripe.Pad
}

func newEpollLoop(t *reactorTransport, id int) (*epollLoop, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	r, _, errno := syscall.RawSyscall(syscall.SYS_EVENTFD2, 0, syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if errno != 0 {
		_ = syscall.Close(epfd)
		return nil, fmt.Errorf("eventfd2: %w", errno)
	}
	l := &epollLoop{id: id, epfd: epfd, wake: int(r), done: make(chan struct{}),
		events: make([]syscall.EpollEvent, 256)}
	l.ev = newEvState(t, l, id)
	l.wait = l.poll
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(l.wake)}
	err = syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, l.wake, &ev)
	if err == nil {
		// A non-blocking fd given to os.NewFile joins the runtime's poller.
		err = syscall.SetNonblock(epfd, true)
	}
	if err == nil && t.spareP {
		// Never parked in the runtime's poller (waitEvents): there it would
		// wake the poller's thread at every batch.
		return l, nil
	}
	if err == nil {
		l.ep = os.NewFile(uintptr(epfd), "epoll")
		l.rc, err = l.ep.SyscallConn()
	}
	if err != nil {
		if l.ep != nil {
			_ = l.ep.Close()
		} else {
			_ = syscall.Close(epfd)
		}
		_ = syscall.Close(l.wake)
		return nil, fmt.Errorf("epoll: %w", err)
	}
	return l, nil
}

// waitEvents takes the ready events: those ready now,
// else it waits until one comes or wake (transport clock, 0 for never)
// passes.
//
// With several loops, a loop waits in epoll_pwait itself, a blocking
// syscall (the runtime gives its P to other goroutines if it lasts). In
// the runtime's poller only one thread waits, for all of the process's
// sockets: a loop whose events came while that thread was running another
// loop waited for the runtime to look again, and a core sat idle with
// requests waiting (bench/RESULTS.md, "A wait of its own for each loop").
// Without a P beyond the loops (server.ProcsFor), a single loop, and a
// loop with requests waiting for a blocking call on goroutines (a filter's
// Redis round trip), park in the runtime's poller instead: their thread
// then also runs those goroutines and waits for their sockets. With one,
// goroutines run there and every loop waits on its own: its epoll fd is
// then not in the runtime's poller at all (l.ep is nil).
func (l *epollLoop) waitEvents(wake int64) error {
	l.n = 0
	if l.ep != nil && (l.single || l.ev.blocked > 0) {
		return l.park(wake)
	}
	// One blocking call, even when events are ready: a look without
	// waiting first costs a second syscall whenever the loop goes idle,
	// which at a moderate rate is once or twice per request, and saves
	// only the runtime's syscall bookkeeping when events are ready.
	ev := uintptr(unsafe.Pointer(&l.events[0]))
	holdP := l.ep == nil && waitHoldingP && !l.idle && l.ev.blocked == 0
	var r uintptr
	var errno syscall.Errno
	for {
		timeout := -1
		if wake != 0 {
			// Rounded up: epoll counts milliseconds, and a deadline must
			// not be looked at before it passed.
			timeout = int(max(wake-l.ev.t.now()+int64(time.Millisecond)-1, 0) / int64(time.Millisecond))
		}
		if holdP {
			capped := timeout < 0 || timeout > holdPWaitMs
			if capped {
				timeout = holdPWaitMs
			}
			r, errno = epollWaitHoldingP(l.epfd, ev, len(l.events), timeout)
			if errno == syscall.EINTR {
				// A signal, most often the runtime asking the loop to stop
				// (a preemption, a stop of the world for the GC): the batch
				// the loop now runs, empty, passes the check that honours it.
				return nil
			}
			l.idle = errno == 0 && r == 0 && capped
			break
		}
		r, _, errno = syscall.Syscall6(syscall.SYS_EPOLL_PWAIT, uintptr(l.epfd), ev, uintptr(len(l.events)), uintptr(timeout), 0, 0)
		if errno != syscall.EINTR {
			l.idle = r == 0
			break
		}
	}
	if errno != 0 {
		return os.NewSyscallError("epoll_pwait", errno)
	}
	l.n = int(r)
	return nil
}

// waitHoldingP: a loop with its own epoll fd (a P spare for the rest,
// server.ProcsFor) waits in a raw epoll_pwait that keeps its P, rather
// than a syscall the runtime may take the P from.
//
// The runtime's monitor counts a P's time slice from the last time a
// goroutine was scheduled on it, which a loop that only enters and leaves
// epoll_pwait never is. Every 10 ms the monitor found the loop's slice used
// up: running, it preempted it; waiting in a syscall, it took its P, and a
// P taken counts as work found, after which the monitor polled every 20 µs
// for a millisecond or more. At 13,000 req/s that monitor used 4 % of the
// gateway's CPU (bench/RESULTS.md, "A wait that keeps its P"). Holding the
// P, the loop is only ever preempted, as often as before, and the monitor
// sleeps.
//
// A P held in a raw syscall is reached by the runtime's signals only: a
// preemption or a stop of the world interrupts epoll_pwait (EINTR, never
// restarted) and the loop honours it on its way back. With asynchronous
// preemption off (GODEBUG asyncpreemptoff=1) there are no such signals,
// and the loop waits in an ordinary syscall.
var waitHoldingP = asyncPreemptOn(os.Getenv("GODEBUG"))

// epollWaitHoldingP is epoll_pwait as a raw syscall: the P stays with the
// calling goroutine, and only a signal (EINTR) ends the wait early.
func epollWaitHoldingP(epfd int, events uintptr, n, timeoutMs int) (uintptr, syscall.Errno) {
	r, _, errno := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(epfd), events, uintptr(n), uintptr(timeoutMs), 0, 0)
	return r, errno
}

// holdPWaitMs bounds a wait that holds the P. A loop idle that long waits
// next in an ordinary syscall (epollLoop.idle), and so does one with
// requests waiting for a blocking call: the runtime may then give the P
// to other goroutines (the blocking calls themselves, the admin listener,
// Redis replies), which otherwise have only the spare P, and an idle
// gateway's loops are neither preempted nor woken. Under load a loop's
// waits are far shorter (at 13,000 req/s, about 80 µs between requests).
const holdPWaitMs = 1

// asyncPreemptOn reports whether a GODEBUG value leaves the runtime's
// asynchronous preemption on (the last asyncpreemptoff setting wins, as
// in the runtime).
func asyncPreemptOn(godebug string) bool {
	on := true
	for _, kv := range strings.Split(godebug, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(kv), "asyncpreemptoff="); ok {
			on = v != "1"
		}
	}
	return on
}

// park is waitEvents through the runtime's poller: the epoll fd's read
// deadline is the wake time. A deadline still ahead and no later than wake
// is kept, as the loop's timer was: the earliest request deadline moves
// with almost every batch, and waking early only costs a look.
func (l *epollLoop) park(wake int64) error {
	if keep := l.parkUntil > l.ev.clock && (wake == 0 || l.parkUntil <= wake); !keep {
		l.parkUntil = wake
		var at time.Time
		if wake != 0 {
			at = l.ev.t.epoch.Add(time.Duration(wake))
		}
		if err := l.ep.SetReadDeadline(at); err != nil {
			return err
		}
	}
	err := l.rc.Read(l.wait)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// Passed: reads fail at once until the deadline moves.
		l.parkUntil = -1
		return nil
	}
	return err
}

// poll takes the events ready now, without blocking; false makes the
// RawConn wait until the epoll fd is readable and call it again.
func (l *epollLoop) poll(fd uintptr) bool {
	r, _, errno := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, fd,
		uintptr(unsafe.Pointer(&l.events[0])), uintptr(len(l.events)), 0, 0, 0)
	l.n = int(r)
	return errno != 0 || l.n > 0
}

// run waits for events and runs their requests until stop; it is the
// loop's only goroutine.
func (l *epollLoop) run() { l.runEvents() }

// closeFDs releases the loop's epoll set and wake-up fd as run returns.
func (l *epollLoop) closeFDs() {
	l.mu.Lock()
	l.closed = true
	_ = syscall.Close(l.wake)
	if l.ep != nil {
		_ = l.ep.Close()
	} else {
		_ = syscall.Close(l.epfd)
	}
	l.mu.Unlock()
	close(l.done)
}

// stop ends run and waits for it.
func (l *epollLoop) stop() {
	l.ev.stopping.Store(true)
	l.kick()
	<-l.done
}

// kick wakes the loop to look at what was posted to it.
func (l *epollLoop) kick() {
	var one = [8]byte{7: 1}
	_, _ = syscall.Write(l.wake, one[:])
}

// fdOwner is what a watched descriptor belongs to: one of the three.
type fdOwner struct {
	conn *clientConn
	up   *upConn
	ln   *loopListener
}

// fdTable finds the owner of an event's descriptor without a lock: the
// loop looks one up for every event, where it took a read lock and up to
// three map look-ups (0.93 % of the gateway's samples under wrk, 0.71 %
// with the table; bench/RESULTS.md, "New connections without the
// runtime's poller"). Writers hold the loop's mu; the slots grow by copy.
type fdTable struct {
	slots atomic.Pointer[[]atomic.Pointer[fdOwner]]
}

func (t *fdTable) get(fd int32) *fdOwner {
	if s := t.slots.Load(); s != nil && fd >= 0 && int(fd) < len(*s) {
		return (*s)[fd].Load()
	}
	return nil
}

// set records fd's owner (nil for none); the caller holds the loop's mu.
func (t *fdTable) set(fd int32, o *fdOwner) {
	s := t.slots.Load()
	if s == nil || int(fd) >= len(*s) {
		if o == nil {
			return
		}
		var old []atomic.Pointer[fdOwner]
		if s != nil {
			old = *s
		}
		grown := make([]atomic.Pointer[fdOwner], max(64, 2*len(old), int(fd)+1))
		for i := range old {
			grown[i].Store(old[i].Load())
		}
		t.slots.Store(&grown)
		s = &grown
	}
	(*s)[fd].Store(o)
}

// each calls f for every owner recorded; the caller holds the loop's mu.
func (t *fdTable) each(f func(*fdOwner)) {
	if s := t.slots.Load(); s != nil {
		for i := range *s {
			if o := (*s)[i].Load(); o != nil {
				f(o)
			}
		}
	}
}

// watch starts watching fd for events on behalf of own; an event carries
// gen, which tells own's events from those of an fd's earlier owner.
func watch(l *epollLoop, own fdOwner, fd int32, gen uint32, events uint32) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return net.ErrClosed
	}
	l.owners.set(fd, &own)
	ev := syscall.EpollEvent{Events: events, Fd: fd, Pad: int32(gen)}
	if err := sysEpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		l.owners.set(fd, nil)
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

// unwatch stops watching fd, whose owner own is about to close it; with
// closing, own's closing of fd (its only descriptor) is what takes it out
// of the epoll set.
func unwatch(l *epollLoop, own fdOwner, fd int32, closing bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if o := l.owners.get(fd); o != nil && *o == own {
		l.owners.set(fd, nil)
	}
	if !l.closed && !closing {
		_ = sysEpollCtl(l.epfd, syscall.EPOLL_CTL_DEL, fd, nil)
	}
}

// add starts watching a new connection, for its whole life (evArm).
func (l *epollLoop) add(c *clientConn) error {
	return watch(l, fdOwner{conn: c}, c.fd, c.gen, evArm)
}

// remove stops watching a connection about to be closed.
func (l *epollLoop) remove(c *clientConn) { unwatch(l, fdOwner{conn: c}, c.fd, false) }

// forget stops watching a connection whose only descriptor is about to be
// closed.
func (l *epollLoop) forget(c *clientConn) { unwatch(l, fdOwner{conn: c}, c.fd, true) }
