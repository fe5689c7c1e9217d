//go:build linux

package reactor

import (
	"bufio"
	"errors"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/server/h2"
	"github.com/tollgate/tollgate/server/transport"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/internal/stripe"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

// reactorTransport is the gateway's reactor: one epoll loop per worker
// watches its connections, and a connection that turns readable is served
// on a fiber of its loop, which parses with fasthttp's types, answers
// every request its input holds (pipelined requests included), flushes
// once and gives the connection back to the loop. A connection holds no
// goroutine and no parse buffers while it waits between requests.
//
// Nothing reads a socket but the fiber serving it, and only when its
// bufio.Reader needs bytes: read-ahead per connection is capped at that
// reader's size (readBufSize), and bytes a client pushes while its
// connection is busy stay in the kernel's socket buffer, whose TCP window
// then closes on the client. (The transport was first built on
// github.com/cloudwego/netpoll, whose poller reads every readable socket
// into an input buffer without bound and, as of v0.7.2, cannot be told to
// stop; "transport: netpoll" still names it.)
//
// Idle and first-request timeouts are enforced by one sweeper goroutine per
// transport; the header, body and write timeouts by the loops' timers
// while a request is being served.
type reactorTransport struct {
	h transport.Handler
	o transport.Options

	readBufSize  int   // bufio.Reader size: request line + header limit
	maxBody      int64 // body limit, 0 for none
	streamBytes  int   // bodies above this are streamed
	trailerBytes int   // chunked trailer section limit

	firstWait time.Duration // new connection: longest wait for a request
	idleWait  time.Duration // keep-alive connection: longest wait
	sweepTick time.Duration // 0: no sweeper

	epoch time.Time    // origin of the transport's monotonic clock
	clock atomic.Int64 // coarse clock, set by the sweeper every sweepTick
	work  sync.Pool    // *serveState
	gen   atomic.Uint32
	dns   *dnsCache // upstream host names dialed from the loops
	// spareP: GOMAXPROCS leaves a P beyond the event loops (server.ProcsFor).
	spareP bool

	conns atomic.Int64 // open, admitted connections
	// busy counts connections being served, in the stripe of their loop
	// (every request of a keep-alive connection adds one and takes it
	// back): loops never write the same line.
	_       stripe.Pad
	busy    [stripe.N]busyCell
	serving atomic.Int64 // Serve calls running
	shut    atomic.Bool

	mu      sync.Mutex
	live    map[*clientConn]struct{} // admitted connections, for the sweeper and Shutdown
	lns     []net.Listener
	loopLns map[net.Listener]*loopListener // the listeners the loops accept from
	loops   []*epollLoop
	started bool

	// calls says how the loops make their socket calls (SocketCalls);
	// ringsOK, that the kernel allows them rings (checkRing), and
	// ringLoops how many have one (IOUringLoops).
	calls       atomic.Pointer[string]
	ringsOK     bool
	ringLoops   atomic.Int32
	ringEntries uint32 // each loop's ring's size (ringEntries)

	// h2 serves HTTP/2 on the loops (h2conn_linux.go); nil hands h2
	// connections to o.HTTP2 (h2.go).
	h2 *h2.Server

	// Streamed answers (answer_window), by how they ended: each is a
	// large answer, rare beside requests, so one shared line is no cost.
	streamsDone, streamsCut, streamsStalled atomic.Uint64

	stopOnce  sync.Once
	stopSweep chan struct{}
	sweepDone chan struct{}
}

// serveState is what a goroutine serving a connection borrows from the pool.
type serveState struct {
	br   *bufio.Reader
	bw   *bufio.Writer
	req  fasthttp.Request
	resp fasthttp.Response
	// answer is resp's header section when the handler kept an
	// upstream's as read: lent as pipeline.Ctx.Answer, written from here.
	answer codec.Answer
	pre    []byte // a body read whole (up to streamBytes), or the decoded start of a chunked one
	// ctx is the requests' context, one at a time: the transport readies
	// it, the handler serves in it, and it is released once the answer is
	// written (request.go).
	ctx *pipeline.Ctx
}

const (
	// writeBufSize is the bufio.Writer size; larger writes go straight to
	// the socket.
	writeBufSize = 4096
	// acceptGrace is how long Shutdown keeps accepting the connections
	// the kernel had already queued.
	acceptGrace = 100 * time.Millisecond
	// shutdownSettle is how long Shutdown lets a request sent on a just-accepted
	// connection arrive before it closes the connections left idle.
	shutdownSettle = 250 * time.Millisecond
	// maxBodyDrain is how much of a streamed body the handler left unread the
	// transport reads and drops to keep the connection; beyond it, it closes.
	maxBodyDrain = 256 << 10
)

// Connection states. Only a loop moves idle→busy; the sweeper and Shutdown
// move idle→closed, so a request that has started is never cut by them.
const (
	connIdle int32 = iota
	connBusy
	connClosed
)

// New returns the reactor transport.
func New(h transport.Handler, o transport.Options) (transport.Transport, error) {
	if h == nil {
		return nil, errors.New("reactor transport: nil handler")
	}
	sized := o
	if sized.MaxHeaderBytes <= 0 {
		sized.MaxHeaderBytes = transport.DefaultHeaderBytes
	}
	if sized.MaxURIBytes <= 0 {
		sized.MaxURIBytes = transport.DefaultURIBytes
	}
	t := &reactorTransport{
		h:            h,
		o:            o,
		readBufSize:  sized.ReadBufferSize(),
		maxBody:      max(o.MaxBodyBytes, 0),
		streamBytes:  o.StreamBodyBytes,
		trailerBytes: sized.MaxHeaderBytes,
		epoch:        time.Now(),
		dns:          newDNSCache(),
		live:         make(map[*clientConn]struct{}),
		loopLns:      make(map[net.Listener]*loopListener),
		stopSweep:    make(chan struct{}),
		sweepDone:    make(chan struct{}),
		ringEntries:  ringEntries,
	}
	if t.streamBytes <= 0 {
		t.streamBytes = fasthttp.DefaultMaxRequestBodySize
	}
	t.h2 = loopH2(o.HTTP2)
	if err := t.checkRing(); err != nil {
		return nil, err
	}
	// Like fasthttp.Server: a new connection gets the header timeout for its
	// first request, a keep-alive one the idle timeout (each falls back on
	// the other).
	t.firstWait, t.idleWait = o.HeaderTimeout, o.IdleTimeout
	if t.firstWait <= 0 {
		t.firstWait = o.IdleTimeout
	}
	if t.idleWait <= 0 {
		t.idleWait = o.HeaderTimeout
	}
	if shortest := min(t.firstWait, t.idleWait); shortest > 0 {
		t.sweepTick = min(max(shortest/4, 10*time.Millisecond), time.Second)
	}
	t.work.New = func() any {
		return &serveState{
			br:  bufio.NewReaderSize(nil, t.readBufSize),
			bw:  bufio.NewWriterSize(nil, writeBufSize),
			ctx: pipeline.NewOwned(),
		}
	}
	return t, nil
}

// startLocked starts the loops and the sweeper, once; t.mu is held.
func (t *reactorTransport) startLocked() error {
	if t.started {
		return nil
	}
	// Each loop runs its requests: one per core.
	n := t.o.Workers
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	// With a P beyond the loops, goroutines run there: every loop waits on
	// its own and never yields (waitEvents).
	t.spareP = runtime.GOMAXPROCS(0) > n
	loops := make([]*epollLoop, 0, n)
	for range n {
		l, err := newEpollLoop(t, takeLoopID())
		if err != nil {
			for _, l := range loops {
				go l.run()
				l.stop()
			}
			return err
		}
		loops = append(loops, l)
	}
	if n == 1 {
		loops[0].single = true
	}
	if err := t.setRings(loops); err != nil {
		for _, l := range loops {
			go l.run()
			l.stop()
		}
		return err
	}
	for _, l := range loops {
		go l.run()
	}
	t.loops = loops
	t.started = true
	if t.sweepTick > 0 {
		t.clock.Store(t.now())
		go t.sweep()
	} else {
		close(t.sweepDone)
	}
	return nil
}

// Serve implements Transport. A TCP listener is closed as soon as the
// loops hold a descriptor of its socket (listenOnLoops): from then on only
// Shutdown stops the accepting. Other listeners are accepted from here.
func (t *reactorTransport) Serve(ln net.Listener) error {
	t.mu.Lock()
	if t.shut.Load() {
		t.mu.Unlock()
		_ = ln.Close()
		return nil
	}
	if err := t.startLocked(); err != nil {
		t.mu.Unlock()
		_ = ln.Close()
		return err
	}
	t.lns = append(t.lns, ln)
	t.serving.Add(1)
	t.mu.Unlock()
	defer t.serving.Add(-1)

	if ll, ok := t.listenOnLoops(ln); ok {
		t.mu.Lock()
		t.loopLns[ln] = ll
		shut := t.shut.Load()
		t.mu.Unlock()
		if shut { // Shutdown took t.lns before ln joined it
			ll.stop()
		}
		<-ll.done
		return nil
	}

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if t.shut.Load() {
				// Shutdown's accept grace ended (or the listener closed).
				_ = ln.Close()
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of file descriptors and the like: wait, then go on.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		t.accept(nc)
	}
}

// accept admits a new connection and gives it to a loop, or closes it when
// MaxConns are already open.
func (t *reactorTransport) accept(nc net.Conn) {
	if !t.admit() {
		_ = nc.Close()
		return
	}
	c := &clientConn{t: t, nc: nc, peer: transport.PeerOf(nc.RemoteAddr()), fd: -1}
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			c.rc = rc
			_ = rc.Control(func(fd uintptr) { c.fd = int32(fd) })
		}
	}
	t.adopt(c, nil)
}

// pickLoop chooses the loop of a new connection: the loop that accepted
// it unless it serves more than loopSlack connections above the least
// busy one, which gets it then. The accepting loop is awake already;
// handing every connection to the next loop in turn, as before, woke a
// second loop for each: 0.52 ms from connect to first byte on an idle
// gateway, 0.37 ms now, nginx's 0.36 (bench/RESULTS.md, "New connections
// without the runtime's poller"). The slack keeps keep-alive connections,
// which stay where they land, spread evenly.
func pickLoop(loops []*epollLoop, accepting *epollLoop) *epollLoop {
	least := loops[0]
	for _, l := range loops[1:] {
		if l.live.Load() < least.live.Load() {
			least = l
		}
	}
	if accepting != nil && accepting.live.Load() <= least.live.Load()+loopSlack {
		return accepting
	}
	return least
}

// loopSlack is how many more connections than the least busy loop the
// accepting loop may keep.
const loopSlack = 2

// adopt gives a new admitted connection to a loop: the one that accepted
// it (nil for the acceptor goroutine) when that is not clearly busier than
// another (pickLoop).
func (t *reactorTransport) adopt(c *clientConn, accepting *epollLoop) {
	c.gen = t.gen.Add(1)
	c.peekFn = c.peek
	if t.o.TLS != nil {
		c.startTLS(t.o.TLS)
	}
	c.last.Store(t.clock.Load())
	t.mu.Lock()
	if c.fd < 0 || len(t.loops) == 0 {
		t.mu.Unlock()
		c.closeSocket()
		t.conns.Add(-1)
		return
	}
	t.live[c] = struct{}{}
	c.loop = pickLoop(t.loops, accepting)
	c.loop.live.Add(1)
	t.mu.Unlock()
	if err := c.loop.add(c); err != nil {
		c.close()
	}
}

// dispatch starts serving a connection whose input is ready (a loop calls
// it), unless it is busy or closed already.
func (t *reactorTransport) dispatch(c *clientConn) {
	if c.state.CompareAndSwap(connIdle, connBusy) {
		t.served(c, 1)
		c.loop.ev.post(evPost{c: c})
	}
}

// Conns implements Transport.
func (t *reactorTransport) Conns() int { return int(t.conns.Load()) }

// now reads the transport's monotonic clock; connections record their last
// activity off the coarse copy in clock.
func (t *reactorTransport) now() int64 { return int64(time.Since(t.epoch)) }

// clockAt converts a deadline to the transport's clock; 0 is none.
func (t *reactorTransport) clockAt(d time.Time) int64 {
	if d.IsZero() {
		return 0
	}
	return max(int64(d.Sub(t.epoch)), 1)
}

// admit counts a new connection unless MaxConns are already open.
func (t *reactorTransport) admit() bool {
	limit := int64(t.o.MaxConns)
	for {
		n := t.conns.Load()
		if limit > 0 && n >= limit {
			return false
		}
		if t.conns.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

type busyCell struct {
	n atomic.Int64
	_ stripe.Pad
}

// served adds d to the connections being served, in c's loop's stripe.
func (t *reactorTransport) served(c *clientConn, d int64) {
	st := 0
	if c.loop != nil {
		st = stripe.Of(c.loop.id)
	}
	t.busy[st].n.Add(d)
}

// busyConns is how many connections are being served.
func (t *reactorTransport) busyConns() int64 {
	var n int64
	for i := range t.busy {
		n += t.busy[i].n.Load()
	}
	return n
}

func (t *reactorTransport) noteCalls(how string) { t.calls.Store(&how) }

// IOUringLoops is how many event loops make their socket calls through an
// io_uring now.
func (t *reactorTransport) IOUringLoops() int { return int(t.ringLoops.Load()) }

// SocketCalls says how the event loops make their socket calls: in
// batches through an io_uring, or one syscall each and why; "" before the
// transport serves.
func (t *reactorTransport) SocketCalls() string {
	if p := t.calls.Load(); p != nil {
		return *p
	}
	return ""
}
