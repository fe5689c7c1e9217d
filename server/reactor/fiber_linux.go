//go:build linux

package reactor

import (
	"iter"
	"net"
	"time"

	"github.com/tollgate/tollgate/pipeline"
)

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

// end stops a fiber no longer kept; its buffers go back to the pool.
func (f *fiber) end() {
	f.stop()
	if f.work != nil {
		f.s.t.work.Put(f.work)
		f.work = nil
	}
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

// Yield implements pipeline.Loop: the fiber goes to the end of the ready
// line, which the loop runs before its next socket calls are made.
func (f *fiber) Yield() {
	s := f.s
	if s.cur != f {
		return
	}
	f.waitIO = nil
	f.queued = true
	s.ready = append(s.ready, f)
	f.yield(fiberWait)
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

// Lag implements pipeline.LoopLoad (read on the loop): the longer of the
// loop's smoothed batch length, which a request that became ready during
// the last batch waited, and how long the running batch has run, which
// this request waited since the loop woke for it. The second reacts
// within a batch: once it runs long, the rest of it can be shed.
func (f *fiber) Lag() time.Duration {
	s := f.s
	return time.Duration(max(s.lag, s.t.now()-s.clock))
}

// ID implements pipeline.Loop.
func (f *fiber) ID() int { return f.s.id }

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
