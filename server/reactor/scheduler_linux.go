//go:build linux

package reactor

import (
	"github.com/tollgate/tollgate/internal/sockpeek"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/internal/stripe"
	"github.com/tollgate/tollgate/internal/uring"
	"github.com/tollgate/tollgate/pipeline"
	"golang.org/x/sys/unix"
)

// Each loop runs the requests of its connections itself. A request runs on a fiber (a
// coroutine, iter.Pull) that the loop resumes directly, without the Go
// scheduler: when the request must wait for its client or its backend,
// the fiber yields back to the loop, which watches the socket in its own
// epoll set and resumes the fiber when the socket is ready or its
// deadline passes. Client and upstream sockets are registered once,
// edge-triggered, so a request costs no epoll_ctl, and no read is tried
// before epoll said there are bytes.
//
// A filter's bounded blocking call (Ctx.Block) runs on a goroutine of its
// own while its fiber stays parked on the loop; the goroutine hands the
// fiber back through the loop's post queue. So a fiber only ever runs on
// its loop's goroutine, which can then keep its OS thread (runEvents).
// Ctx.Sleep parks the fiber on the loop's timers.

// evArm is how a loop watches a socket, once for its life:
// readable, writable and hung up, edge-triggered.
const evArm = uint32(syscall.EPOLLIN|syscall.EPOLLOUT|syscall.EPOLLRDHUP) | 1<<31 // EPOLLET

// note records what an event reports.
func (io *evIO) note(events uint32) {
	if events&(syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 {
		io.hup.Store(true)
	}
	if events&(syscall.EPOLLIN|syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 {
		io.rready.Store(true)
	}
	if events&(syscall.EPOLLOUT|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 {
		io.wready.Store(true)
	}
}

// evState is what a loop knows of the requests it runs: its fibers, their
// timers, and the work other goroutines posted to it.
type evState struct {
	_  stripe.Pad // one loop writes it: no line shared with a neighbour
	t  *reactorTransport
	l  *epollLoop
	id int

	cur  *fiber   // the fiber the loop is running now
	free []*fiber // free fibers, most recently used last
	// started is when the loop last gave a fiber work (transport clock).
	started int64

	// clock is the transport clock when the loop last woke: deadlines the
	// loop's requests set run from it, one clock read per batch of events.
	clock int64
	// now is clock as a time.Time (Now), made once per batch that asks.
	now   time.Time
	nowAt int64

	// lag is the loop's smoothed lag (pipeline.LoopLoad), ns: how long
	// its batches of work take, which is how long a request that became
	// ready during one waits to run; batchEnd is when the last ended.
	lag      int64
	batchEnd int64

	timers   fiberHeap // fibers waiting with a deadline
	blocked  int       // fibers waiting for a blocking call on a goroutine
	stopping atomic.Bool

	ready []*fiber // unparked fibers, resumed once the running one yields

	// ring makes the fibers' socket calls in batches (ring_linux.go);
	// nil makes each at once. inRing are the fibers whose call is queued,
	// by tag.
	ring      *uring.Ring
	inRing    []*fiber
	spareRing []*fiber

	mu     sync.Mutex // guards posted
	posted []evPost   // work handed in from other goroutines
	spare  []evPost
	_      stripe.Pad
}

// evPost is a connection to serve, a fiber whose blocking call
// returned (ev fiberReturned), or a function to run on the loop.
type evPost struct {
	c  *clientConn
	f  *fiber
	ev fiberEvent
	fn func()
}

func newEvState(t *reactorTransport, l *epollLoop, id int) *evState {
	return &evState{t: t, l: l, id: id, nowAt: -1}
}

// runEvents waits for events and resumes the fibers they concern, until
// the loop stops.
func (l *epollLoop) runEvents() {
	s := l.ev
	if s.t.spareP {
		// The loop keeps its OS thread. Unlocked, the runtime's monitor
		// preempts a busy loop about every 10 ms and another thread often
		// resumes it; on CPUs shared with other processes each move waits
		// for the kernel to run that thread, and the open loop's p99.9 was
		// three times as long (bench/RESULTS.md, "The loop on a thread of
		// its own"). Its fibers never run elsewhere (Block), as a locked
		// thread's coroutines must not. Without a spare P the loop's thread
		// runs the process's other goroutines between batches, which a
		// lock would hand to another thread each time.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread() // after the fibers are stopped
	}
	defer func() {
		for _, f := range s.free {
			f.end()
		}
		s.free = nil
		l.closeFDs()
		releaseLoopID(l.id)
		if s.ring != nil {
			s.ring.Close()
			s.ring = nil
		}
	}()
	var drain [8]byte
	wake := int64(0) // when the loop must wake without an event (transport clock), 0 for never
	for {
		if err := l.waitEvents(wake); err != nil {
			return
		}
		s.clock = s.t.now()
		for i := range l.events[:max(l.n, 0)] {
			ev := &l.events[i]
			if ev.Fd == int32(l.wake) {
				_, _ = syscall.Read(l.wake, drain[:])
				continue
			}
			o := l.owners.get(ev.Fd)
			if o == nil {
				continue
			}
			switch c, u, ll := o.conn, o.up, o.ln; {
			case c != nil && c.gen == uint32(ev.Pad):
				c.io.note(ev.Events)
				if c.io.waited() {
					s.wake(&c.io)
				} else if c.io.readable() {
					s.dispatch(c)
				}
			case u != nil && u.gen == uint32(ev.Pad):
				u.io.note(ev.Events)
				if ev.Events&(syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 {
					u.hungUp(s.clock)
				}
				if u.io.waited() {
					s.wake(&u.io)
				}
			case ll != nil && ll.gen == uint32(ev.Pad):
				l.acceptFrom(ll)
			}
		}
		s.takePosted()
		s.runReady()
		s.expire(s.clock)
		s.runReady()
		s.noteBatch(s.t.now())
		if s.stopping.Load() {
			if s.abort() {
				return
			}
			// Another round soon, whether or not an event comes.
			wake = s.clock + int64(10*time.Millisecond)
			continue
		}
		s.retire(s.clock)
		wake = s.nextWake()
		if l.n > 0 && l.ep != nil {
			// Without a P of their own (server.ProcsFor), the other
			// goroutines of a busy loop's P (timers, the access log's
			// writer, Redis clients) would wait for a forced preemption:
			// they run between batches instead. (A yield does not poll
			// the network, so those waiting for a socket still wait for
			// the runtime's monitor, up to 10 ms.)
			runtime.Gosched()
		}
	}
}

// noteBatch folds the length of the batch that ends at end into the
// loop's lag: an average over about eight batches, so that one long batch
// does not shed requests, begun afresh when the loop sat idle for longer
// than its lag before the batch (nothing waited for it then, however long
// the batches before the pause were).
func (s *evState) noteBatch(end int64) {
	busy := end - s.clock
	if s.clock-s.batchEnd > s.lag {
		s.lag = busy
	} else {
		s.lag += (busy - s.lag) / 8
	}
	s.batchEnd = end
}

// dispatch starts serving an idle connection with input (loop only).
func (s *evState) dispatch(c *clientConn) {
	if c.state.CompareAndSwap(connIdle, connBusy) {
		s.t.served(c, 1)
		s.start(c)
	}
}

// start serves c, already marked busy, on a free fiber.
func (s *evState) start(c *clientConn) {
	if s.stopping.Load() {
		c.close()
		s.t.served(c, -1)
		return
	}
	f := s.takeFiber()
	f.conn = c
	c.fiber = f
	s.run(f)
}

// takeFiber returns a free fiber, or a new one.
func (s *evState) takeFiber() *fiber {
	s.started = s.clock
	if n := len(s.free); n > 0 {
		f := s.free[n-1]
		s.free[n-1] = nil
		s.free = s.free[:n-1]
		return f
	}
	return s.newFiber()
}

// run resumes f on the loop until it yields.
func (s *evState) run(f *fiber) {
	s.cur = f
	ev, ok := f.next()
	s.cur = nil
	if !ok {
		return
	}
	s.after(f, ev)
}

// after handles what f yielded.
func (s *evState) after(f *fiber, ev fiberEvent) {
	switch ev {
	case fiberDone:
		if f.job != nil {
			f.job = nil
			f.freeAt = s.clock
			s.free = append(s.free, f)
			return
		}
		c := f.conn
		f.conn = nil
		c.fiber = nil
		f.freeAt = s.clock
		s.free = append(s.free, f)
		// Bytes that arrived while it was busy gave their edge already.
		// A read that took exactly what there was leaves the flag set
		// with nothing to read: a fiber started then would wait for the
		// next request under the header timeout, not the idle one, and
		// close a keep-alive connection its client still holds (whose
		// next request would then fail). The socket is asked.
		if c.state.Load() == connIdle && c.io.readable() {
			if sockpeek.Pending(uintptr(c.fd)) {
				s.dispatch(c)
			} else {
				c.io.rready.Store(false)
			}
		}
	case fiberReturned:
		s.blocked--
		s.run(f)
	case fiberWait:
		// Registered in its socket's evIO or the timers, or its blocking
		// call's goroutine posts it back; woken from there.
	}
}

// runBlocking runs f's blocking call on this goroutine, then hands f back
// to its loop.
func (s *evState) runBlocking(f *fiber, call pipeline.BlockingCall) {
	call.Run()
	s.post(evPost{f: f, ev: fiberReturned})
}

// post hands work to the loop from another goroutine.
func (s *evState) post(p evPost) {
	s.mu.Lock()
	s.posted = append(s.posted, p)
	first := len(s.posted) == 1
	s.mu.Unlock()
	if first {
		s.l.kick()
	}
}

// takePosted runs what other goroutines posted.
func (s *evState) takePosted() {
	s.mu.Lock()
	work := s.posted
	s.posted = s.spare[:0]
	s.mu.Unlock()
	for i, p := range work {
		if p.fn != nil {
			p.fn()
		} else if p.c != nil {
			s.start(p.c)
		} else {
			s.after(p.f, p.ev)
		}
		work[i] = evPost{}
	}
	s.spare = work[:0]
}

// wake resumes the fibers waiting on io that io is ready for.
func (s *evState) wake(io *evIO) {
	if f := io.rwaiter; f != nil && io.readable() {
		io.rwaiter = nil
		s.resume(f)
	}
	if f := io.wwaiter; f != nil && io.wready.Load() {
		io.wwaiter = nil
		s.resume(f)
	}
}

func (s *evState) resume(f *fiber) {
	f.waitIO = nil
	s.timers.remove(f)
	s.run(f)
}

// runReady resumes the fibers unparked meanwhile, and those they unpark,
// and makes the socket calls they queued (flush).
func (s *evState) runReady() {
	for len(s.ready) > 0 || len(s.inRing) > 0 {
		for len(s.ready) > 0 {
			f := s.ready[0]
			copy(s.ready, s.ready[1:])
			s.ready[len(s.ready)-1] = nil
			s.ready = s.ready[:len(s.ready)-1]
			f.queued = false
			s.run(f)
		}
		s.flush()
	}
}

// expire resumes the fibers whose deadline has passed.
func (s *evState) expire(now int64) {
	for len(s.timers) > 0 && s.timers[0].deadline <= now {
		s.timeOut(s.timers.pop(), false)
	}
}

// timeOut resumes f, taken off the timers, as its deadline passed: its
// socket wait (or, when all is set, any wait) fails.
func (s *evState) timeOut(f *fiber, all bool) {
	if f.waitIO != nil {
		f.unwait()
		all = true
	}
	f.timedOut = all
	s.run(f)
}

// abort ends a stopping loop's requests: every waiting fiber is woken
// and its waits fail from now on. It reports whether none is left.
func (s *evState) abort() bool {
	// The fibers waiting now, once each: one may wait again (a relay
	// waiting for its other half), and is woken on a later round.
	due := make([]*fiber, 0, len(s.timers))
	for len(s.timers) > 0 {
		due = append(due, s.timers.pop())
	}
	for _, f := range due {
		if f.queued || f.heapAt >= 0 {
			continue // woken (or parked again) by one resumed before it
		}
		s.timeOut(f, true)
	}
	// Fibers waiting without a deadline wait on a socket: close their
	// connections' sockets so they wake.
	l := s.l
	l.mu.RLock()
	var waiting []*evIO
	l.owners.each(func(o *fdOwner) {
		switch {
		case o.conn != nil && o.conn.io.waited():
			waiting = append(waiting, &o.conn.io)
		case o.up != nil && o.up.io.waited():
			waiting = append(waiting, &o.up.io)
		}
	})
	l.mu.RUnlock()
	for _, io := range waiting {
		if f := io.rwaiter; f != nil {
			s.timeOut(f, true)
		}
		if f := io.wwaiter; f != nil {
			s.timeOut(f, true)
		}
	}
	s.runReady()
	return len(waiting) == 0 && len(s.timers) == 0 && len(s.ready) == 0 && s.blocked == 0 && s.busy() == 0
}

// busy counts the connections a fiber still serves (by the time abort
// asks, the fibers waiting for a blocking call).
func (s *evState) busy() int {
	n := 0
	s.l.mu.RLock()
	s.l.owners.each(func(o *fdOwner) {
		if o.conn != nil && o.conn.fiber != nil {
			n++
		}
	})
	s.l.mu.RUnlock()
	return n
}

// retire stops the fibers free for longer than the loop keeps them:
// fiberIdle once it has started no request for that long, else fiberKeep.
func (s *evState) retire(now int64) {
	keep := int64(fiberKeep)
	if now-s.started >= int64(fiberIdle) {
		keep = int64(fiberIdle)
	}
	n := 0
	for n < len(s.free) && now-s.free[n].freeAt >= keep {
		s.free[n].end()
		s.free[n] = nil
		n++
	}
	if n > 0 {
		rest := copy(s.free, s.free[n:])
		clear(s.free[rest:])
		s.free = s.free[:rest]
	}
}

// nextWake is when the loop must wake for its earliest deadline or its
// next retirement (transport clock), 0 for never.
func (s *evState) nextWake() int64 {
	at := int64(0)
	if len(s.timers) > 0 {
		at = s.timers[0].deadline
	}
	if len(s.free) > 0 {
		// The longest free fiber goes at fiberKeep, or sooner if no
		// request starts for fiberIdle from now on.
		oldest := s.free[0].freeAt
		r := min(oldest+int64(fiberKeep), max(oldest, s.started)+int64(fiberIdle))
		if at == 0 || r < at {
			at = r
		}
	}
	return at
}

// await parks the running fiber until io is ready (to write when write)
// or the deadline (transport clock, 0 for none) passes; it reports
// whether the deadline passed. Off the loop (a goroutine), it waits with
// poll(2) instead.
//
// An upstream connection does not know which request uses it: the
// running fiber does. That is why a blocking call (Ctx.Block), which runs
// on a goroutine of its own, makes no upstream exchange on the loop's
// connections.
func (s *evState) await(io *evIO, fd int32, write bool, deadline int64) error {
	return s.awaitFor(s.cur, io, fd, write, deadline)
}

// awaitFor is await for a wait known to be fiber f's (a client socket's).
func (s *evState) awaitFor(f *fiber, io *evIO, fd int32, write bool, deadline int64) error {
	if f == nil || s.cur != f {
		return s.block(fd, write, deadline)
	}
	if s.stopping.Load() {
		return net.ErrClosed
	}
	if write {
		io.wwaiter = f
	} else {
		io.rwaiter = f
	}
	f.waitIO, f.waitW = io, write
	f.timedOut = false
	f.deadline = deadline
	if deadline > 0 {
		s.timers.push(f)
	}
	f.yield(fiberWait)
	if f.timedOut {
		f.timedOut = false
		if s.stopping.Load() {
			return net.ErrClosed
		}
		return os.ErrDeadlineExceeded
	}
	return nil
}

// block waits for fd with poll(2), for code running off the loop.
func (s *evState) block(fd int32, write bool, deadline int64) error {
	events := int16(unix.POLLIN)
	if write {
		events = unix.POLLOUT
	}
	for {
		ms := -1
		if deadline > 0 {
			left := deadline - s.t.now()
			if left <= 0 {
				return os.ErrDeadlineExceeded
			}
			ms = int((left + int64(time.Millisecond) - 1) / int64(time.Millisecond))
		}
		fds := [1]unix.PollFd{{Fd: fd, Events: events}}
		n, err := unix.Poll(fds[:], ms)
		if err == syscall.EINTR || err == nil && n == 0 {
			continue
		}
		return err
	}
}
