//go:build linux

package reactor

import (
	"iter"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/internal/stripe"
	"github.com/tollgate/tollgate/internal/uring"
	"github.com/tollgate/tollgate/pipeline"
	"golang.org/x/sys/unix"
)

// Event-loop mode: each loop runs the requests of its connections itself
// instead of handing them to goroutines. A request runs on a fiber (a
// coroutine, iter.Pull) that the loop resumes directly, without the Go
// scheduler: when the request must wait for its client or its backend,
// the fiber yields back to the loop, which watches the socket in its own
// epoll set and resumes the fiber when the socket is ready or its
// deadline passes. Client and upstream sockets are registered once,
// edge-triggered, so a request costs no epoll_ctl, and no read is tried
// before epoll said there are bytes. The serving code (parsing, limits,
// streaming bodies, pipelining) is the dispatch mode's, unchanged: only
// where it waits differs.
//
// A filter's bounded blocking call (Ctx.Block) runs on a goroutine of its
// own while its fiber stays parked on the loop; the goroutine hands the
// fiber back through the loop's post queue. So a fiber only ever runs on
// its loop's goroutine, which can then keep its OS thread (runEvents).
// Ctx.Sleep parks the fiber on the loop's timers.

// evArm is how event-loop mode watches a socket, once for its life:
// readable, writable and hung up, edge-triggered.
const evArm = uint32(syscall.EPOLLIN|syscall.EPOLLOUT|syscall.EPOLLRDHUP) | 1<<31 // EPOLLET

// fiberEvent is what a fiber tells its loop when it yields.
type fiberEvent uint8

const (
	fiberDone     fiberEvent = iota // the connection was served; the fiber is free
	fiberWait                       // waiting for a socket, a deadline or a blocking call
	fiberReturned                   // (posted) its blocking call returned: resume it
)

// A free fiber is retired once the loop has started no request for
// fiberIdle, so that the goroutine count falls back to its base soon
// after the load ends. While requests keep coming it is kept for
// fiberKeep: a loop's fibers are as many as its requests in flight at the
// last peak, and the next burst finds them ready. Retired after fiberIdle
// under steady traffic, the fibers a burst needed were created again by
// each burst, while its requests waited (a goroutine, its stack grown
// again, its buffers): at 13,000 req/s with bursts of up to 64 requests,
// 107–138 fibers created in 8 s (bench/RESULTS.md, "Fibers kept for the
// next burst").
const (
	fiberIdle = time.Second
	fiberKeep = 30 * time.Second
)

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

// evState is a loop's event-loop mode state.
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

	timers   fiberHeap // fibers waiting with a deadline
	blocked  int       // fibers waiting for a blocking call on a goroutine
	stopping atomic.Bool

	ready []*fiber // unparked fibers, resumed once the running one yields

	// ring makes the fibers' socket calls in batches (evbatch_linux.go);
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

// evPost is a connection to serve, or a fiber whose blocking call
// returned (ev fiberReturned).
type evPost struct {
	c  *clientConn
	f  *fiber
	ev fiberEvent
}

func newEvState(t *reactorTransport, l *epollLoop, id int) *evState {
	return &evState{t: t, l: l, id: id, nowAt: -1}
}

// fiber runs requests on its loop; see the top of this file.
type fiber struct {
	s     *evState
	next  func() (fiberEvent, bool)
	stop  func()
	yield func(fiberEvent) bool
	conn  *clientConn // the connection being served
	job   func()      // or the function it runs (spawn)

	waitIO   *evIO // what the fiber waits for, nil for a deadline only
	waitW    bool  // to write to it
	deadline int64 // transport clock; 0 for none
	heapAt   int   // index in the loop's timers, -1 when not there
	timedOut bool
	woken    bool  // unparked from a ParkQueue
	queued   bool  // in the loop's ready list
	freeAt   int64 // when it was freed (transport clock)

	// The buffers and the request context of the connections the fiber
	// serves, one at a time: kept from one to the next instead of taken
	// from and given back to the process's pools, which cost a pinned
	// slot and a shared ring's atomics each way (1.4 % of the gateway's
	// samples under wrk), and stay warm in this loop's cache.
	work *serveState
	ctx  *pipeline.Ctx

	// The socket call queued in the loop's ring (sockCall) and its result.
	ioBuf []byte
	ioOp  uint8
	ioFd  int32
	ioRes int32
}

func (s *evState) newFiber() *fiber {
	f := &fiber{s: s, heapAt: -1}
	f.next, f.stop = iter.Pull(f.body)
	return f
}

// ownWork returns the fiber's buffers, taken from the transport's pool
// the first time.
func (f *fiber) ownWork() *serveState {
	if f.work == nil {
		f.work = f.s.t.work.Get().(*serveState)
	}
	return f.work
}

// OwnCtx implements pipeline.CtxOwner: the context for the request the
// fiber serves, nil for a fiber running a job or when the context is in
// use (a request of its own must not share it).
func (f *fiber) OwnCtx() *pipeline.Ctx {
	if f.conn == nil {
		return nil
	}
	if f.ctx == nil {
		f.ctx = pipeline.NewOwned()
	}
	if f.ctx.Req != nil {
		return nil
	}
	return f.ctx
}

// end stops a fiber no longer kept; its buffers go back to the pool.
func (f *fiber) end() {
	f.stop()
	if f.work != nil {
		f.s.t.work.Put(f.work)
		f.work = nil
	}
	f.ctx = nil
}

// body serves the connection the loop gives the fiber, then the next.
func (f *fiber) body(yield func(fiberEvent) bool) {
	f.yield = yield
	for {
		if f.job != nil {
			f.job()
		} else {
			f.conn.serve()
		}
		if !yield(fiberDone) {
			return
		}
	}
}

// runEvents is run in event-loop mode.
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

// spawn runs fn on another fiber of f's loop, started once f yields; the
// returned wait parks f until fn is done.
func (f *fiber) spawn(fn func()) (wait func()) {
	s := f.s
	var done bool
	var q pipeline.ParkQueue
	g := s.takeFiber()
	g.queued = true
	g.job = func() {
		fn()
		done = true
		q.WakeOne()
	}
	s.ready = append(s.ready, g)
	return func() {
		for !done {
			f.Park(&q, time.Hour)
		}
	}
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
		if c.state.Load() == connIdle && c.io.readable() {
			s.dispatch(c)
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
		if p.c != nil {
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

// unwait takes f off the socket it waits for.
func (f *fiber) unwait() {
	if io := f.waitIO; io != nil {
		if f.waitW {
			io.wwaiter = nil
		} else {
			io.rwaiter = nil
		}
		f.waitIO = nil
	}
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

// sleep parks the running fiber until d has passed.
func (f *fiber) sleep(d time.Duration) {
	s := f.s
	if s.cur != f {
		time.Sleep(d)
		return
	}
	f.waitIO = nil
	f.deadline = s.t.now() + int64(d)
	s.timers.push(f)
	f.yield(fiberWait)
	f.timedOut = false
}

// Park implements pipeline.Loop: the fiber waits in q, on the loop's
// timers, until a request of the same loop unparks it or d passes.
func (f *fiber) Park(q *pipeline.ParkQueue, d time.Duration) bool {
	s := f.s
	if s.cur != f {
		return false // off the loop nothing can wake it: as if timed out
	}
	f.woken = false
	f.waitIO = nil
	f.deadline = s.t.now() + int64(d)
	q.Push(f)
	s.timers.push(f)
	f.yield(fiberWait)
	if !f.woken {
		q.Remove(f)
	}
	return f.woken
}

// Unpark implements pipeline.Parked; it runs on the loop, in the request
// that wakes f.
func (f *fiber) Unpark() {
	f.woken = true
	f.s.timers.remove(f)
	f.queued = true
	f.s.ready = append(f.s.ready, f)
}

// Sleep implements pipeline.Waiter.
func (f *fiber) Sleep(_ *pipeline.Ctx, d time.Duration) { f.sleep(d) }

// Block implements pipeline.Waiter: the call runs on a goroutine of its
// own while the fiber waits on the loop, and the loop serves the others.
func (f *fiber) Block(_ *pipeline.Ctx, call pipeline.BlockingCall) {
	s := f.s
	if s.cur != f {
		call.Run() // off the loop: this goroutine may block
		return
	}
	s.blocked++
	// The goroutine's post is taken by the loop, after this yield.
	go s.runBlocking(f, call)
	f.yield(fiberWait)
}

// ID implements pipeline.Loop.
func (f *fiber) ID() int { return f.s.id }

// Answer implements pipeline.AnswerHolder: the answer of the request the
// fiber serves, nil for a fiber running a job.
func (f *fiber) Answer() *codec.Answer {
	if f.conn == nil {
		return nil
	}
	return f.conn.answer
}

// Now implements pipeline.Loop: the clock read when the loop last woke.
func (f *fiber) Now() time.Time {
	s := f.s
	if s.nowAt != s.clock {
		s.now, s.nowAt = s.t.epoch.Add(time.Duration(s.clock)), s.clock
	}
	return s.now
}

// Dial implements pipeline.Loop: a connection watched by the fiber's loop.
func (f *fiber) Dial(addr string, timeout time.Duration) (net.Conn, error) {
	return f.s.dial(f, addr, timeout)
}

// fiberHeap is a min-heap of fibers by deadline.
type fiberHeap []*fiber

func (h *fiberHeap) push(f *fiber) {
	*h = append(*h, f)
	f.heapAt = len(*h) - 1
	h.up(f.heapAt)
}

func (h *fiberHeap) pop() *fiber {
	f := (*h)[0]
	h.removeAt(0)
	return f
}

func (h *fiberHeap) remove(f *fiber) {
	if f.heapAt >= 0 {
		h.removeAt(f.heapAt)
	}
}

func (h *fiberHeap) removeAt(i int) {
	a := *h
	f := a[i]
	last := len(a) - 1
	if i != last {
		a[i] = a[last]
		a[i].heapAt = i
	}
	a[last] = nil
	*h = a[:last]
	if i != last {
		h.down(i)
		h.up(i)
	}
	f.heapAt = -1
}

func (h fiberHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p].deadline <= h[i].deadline {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h fiberHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].deadline < h[l].deadline {
			m = r
		}
		if h[i].deadline <= h[m].deadline {
			return
		}
		h.swap(i, m)
		i = m
	}
}

func (h fiberHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapAt, h[j].heapAt = i, j
}
