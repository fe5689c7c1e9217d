// Package netpoll is the gateway's default transport: an epoll reactor
// (Linux) that holds no goroutine and no buffer for an idle connection and
// never reads a socket ahead of its parser, so a client's extra bytes stay
// in the kernel (see docs/memory.md). The name is the configuration's
// (transport: netpoll); it no longer uses the cloudwego library of that
// name, whose poller cannot stop reading.
package reactor

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/server/transport"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/internal/stripe"
	"github.com/valyala/fasthttp"
)

// reactorTransport is the gateway's reactor: epoll loops watch idle
// connections, and a connection that turns readable is served by a
// goroutine of its own, which parses with fasthttp's types, answers every
// request its input holds (pipelined requests included), flushes once and
// hands the connection back. A connection holds no goroutine and no parse
// buffers while it waits between requests.
//
// Nothing reads a socket but the goroutine serving it, and only when its
// bufio.Reader needs bytes: read-ahead per connection is capped at that
// reader's size (readBufSize), and bytes a client pushes while its
// connection is busy stay in the kernel's socket buffer, whose TCP window
// then closes on the client. (The transport was first built on
// github.com/cloudwego/netpoll, whose poller reads every readable socket
// into an input buffer without bound and, as of v0.7.2, cannot be told to
// stop; the name stays for configuration: "transport: netpoll".)
//
// Idle and first-request timeouts are enforced by one sweeper goroutine per
// transport; the header, body and write timeouts by socket deadlines while
// a request is being served.
type reactorTransport struct {
	h  transport.Handler
	lh transport.LoopHandler // h, when it can serve on a loop
	up transport.Upgrader    // h, when its answers may switch protocols
	o  transport.Options

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
	loopLns map[net.Listener]*loopListener // the listeners the loops accept from (event-loop mode)
	loops   []*epollLoop
	started bool

	// eventLoop runs requests on the loops themselves (evloop_linux.go)
	// instead of dispatching them to goroutines.
	eventLoop bool
	// calls says how the loops make their socket calls (SocketCalls);
	// ringsOK, that the kernel allows them rings (checkRing), and
	// ringLoops how many have one (IOUringLoops).
	calls       atomic.Pointer[string]
	ringsOK     bool
	ringLoops   atomic.Int32
	ringEntries uint32 // each loop's ring's size (ringEntries)

	// Streamed answers (answer_window), by how they ended: each is a
	// large answer, rare beside requests, so one shared line is no cost.
	streamsDone, streamsCut, streamsStalled atomic.Uint64

	stopOnce  sync.Once
	stopSweep chan struct{}
	sweepDone chan struct{}
	workers   *workerPool
}

// serveState is what a goroutine serving a connection borrows from the pool.
type serveState struct {
	br   *bufio.Reader
	bw   *bufio.Writer
	req  fasthttp.Request
	resp fasthttp.Response
	// answer is resp's header section when the handler kept an
	// upstream's as read (pipeline.Ctx.Answer): written from here.
	answer codec.Answer
	pre    []byte // a body read whole (up to streamBytes), or the decoded start of a chunked one
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

var (
	strConnection = []byte("Connection")
	strKeepAlive  = []byte("keep-alive")
)

// New returns the reactor transport; it runs on Linux only.
func New(h transport.Handler, o transport.Options) (transport.Transport, error) {
	if runtime.GOOS != "linux" {
		return nil, errors.New("the netpoll transport needs Linux (epoll); use fasthttp")
	}
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
		workers:      newWorkerPool(),
		eventLoop:    o.EventLoop,
		ringEntries:  ringEntries,
	}
	t.lh, _ = h.(transport.LoopHandler)
	t.up, _ = h.(transport.Upgrader)
	if t.streamBytes <= 0 {
		t.streamBytes = fasthttp.DefaultMaxRequestBodySize
	}
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
			br: bufio.NewReaderSize(nil, t.readBufSize),
			bw: bufio.NewWriterSize(nil, writeBufSize),
		}
	}
	return t, nil
}

// startLocked starts the loops and the sweeper, once; t.mu is held.
func (t *reactorTransport) startLocked() error {
	if t.started {
		return nil
	}
	// In dispatch mode the loops only wait and dispatch; reading and
	// parsing happen on the goroutines they start, so one loop serves 20
	// cores. In event-loop mode each loop runs its requests: one per core.
	cores := t.o.Workers
	if cores <= 0 {
		cores = runtime.GOMAXPROCS(0)
	}
	n := cores/20 + 1
	if t.eventLoop {
		n = cores
		// With a P beyond the loops, goroutines run there: every loop
		// waits on its own and never yields (waitEvents).
		t.spareP = runtime.GOMAXPROCS(0) > n
	}
	loops := make([]*epollLoop, 0, n)
	for i := range n {
		l, err := newEpollLoop(t, i)
		if err != nil {
			for _, l := range loops {
				go l.run()
				l.stop()
			}
			return err
		}
		loops = append(loops, l)
	}
	if t.eventLoop && n == 1 {
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
	go t.sweepWorkers()
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

// Serve implements Transport. In event-loop mode a TCP listener is closed
// as soon as the loops hold a descriptor of its socket (listenOnLoops):
// from then on only Shutdown stops the accepting.
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

	if t.eventLoop {
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
		if c.loop.ev != nil {
			c.loop.ev.post(evPost{c: c})
			return
		}
		t.serveOnWorker(c)
	}
}

// Shutdown implements Transport.
func (t *reactorTransport) Shutdown(ctx context.Context) error {
	t.mu.Lock()
	t.shut.Store(true)
	lns := t.lns
	t.lns = nil
	loopLns := t.loopLns
	t.loopLns = map[net.Listener]*loopListener{}
	idle := make([]*clientConn, 0, len(t.live))
	for c := range t.live {
		if c.state.Load() == connIdle {
			idle = append(idle, c)
		}
	}
	t.mu.Unlock()
	defer t.stop()
	if t.o.HTTP2 != nil {
		// GOAWAY on every HTTP/2 connection; each counts as in flight
		// until its streams are answered, so the wait below covers them.
		go func() { _ = t.o.HTTP2.Shutdown(ctx) }()
	}

	// Accepting stops after a short grace: connections the kernel already
	// queued (their clients think they are connected and may have sent a
	// request) are taken and served rather than reset. Every answer from
	// now on carries Connection: close. Idle connections with a request
	// waiting are served; the others are closed once the answers are out
	// and they stayed silent a moment (below), since a keep-alive client
	// may be sending its next request right now.
	for _, ln := range lns {
		// The queue is shrunk to nothing first: from here the kernel drops
		// new SYNs (the client retries and then meets the closed port,
		// before it sent a byte) instead of completing connections nobody
		// will accept.
		if ll := loopLns[ln]; ll != nil {
			ll.shrinkBacklog()
			time.AfterFunc(acceptGrace, ll.stop)
			continue
		}
		shrinkBacklog(ln)
		if d, ok := ln.(interface{ SetDeadline(time.Time) error }); ok && d.SetDeadline(time.Now().Add(acceptGrace)) == nil {
			continue
		}
		_ = ln.Close()
	}
	for _, c := range idle {
		if c.inputWaiting() {
			t.dispatch(c)
		}
	}
	// Then wait for the answers. Once nothing is being served and the
	// listeners are closed, the connections accepted meanwhile are swept:
	// those with a request waiting are served (and closed after it), the
	// silent ones closed. The first sweep waits a moment, so that a request
	// sent right after its connection was accepted has landed.
	settled := time.Time{}
	for {
		if t.busyConns() == 0 && t.serving.Load() == 0 {
			if settled.IsZero() {
				settled = time.Now()
			} else if time.Since(settled) >= shutdownSettle && !t.sweepIdle() {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// sweepIdle closes the idle connections of a shutting-down transport,
// serving first any that has a request waiting; it reports whether it
// found one.
func (t *reactorTransport) sweepIdle() (served bool) {
	t.mu.Lock()
	idle := make([]*clientConn, 0, len(t.live))
	for c := range t.live {
		if c.state.Load() == connIdle {
			idle = append(idle, c)
		}
	}
	t.mu.Unlock()
	for _, c := range idle {
		if c.inputWaiting() {
			t.dispatch(c)
			served = true
			continue
		}
		c.closeIfIdle()
	}
	return served
}

// stop ends the loops and the sweeper. A connection still being served
// (Shutdown ran out of time) closes by itself when it is done.
func (t *reactorTransport) stop() {
	t.stopOnce.Do(func() {
		t.mu.Lock()
		loops, started := t.loops, t.started
		t.loops = nil
		t.started = true // a Serve after Shutdown starts nothing
		t.mu.Unlock()
		if !started {
			return
		}
		close(t.stopSweep)
		<-t.sweepDone
		// Relays have no end of their own but their idle time: they end
		// with the transport (on the loops, stopping ends them anyway).
		t.mu.Lock()
		for c := range t.live {
			if c.relaying.Load() {
				c.shutdownSocket()
			}
		}
		t.mu.Unlock()
		for _, l := range loops {
			l.stop()
		}
		t.stopWorkers()
	})
}

// Conns implements Transport.
func (t *reactorTransport) Conns() int { return int(t.conns.Load()) }

// now reads the transport's monotonic clock; connections record their last
// activity off the coarse copy in clock.
func (t *reactorTransport) now() int64 { return int64(time.Since(t.epoch)) }

// noDeadline clears a socket deadline.
var noDeadline time.Time

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

// serve answers every request the connection's input holds, then hands the
// connection back to its loop, or closes it. It runs on its own goroutine,
// started by dispatch.
func (c *clientConn) serve() {
	t := c.t
	finished := false
	defer func() {
		if !finished { // the handler panicked: keep the books right
			c.close()
			t.served(c, -1)
		}
	}()
	c.linger = false
	// A fiber keeps its buffers between connections; off the loops they
	// come from the pool.
	var w *serveState
	if c.fiber != nil {
		w = c.fiber.ownWork()
	} else {
		w = t.work.Get().(*serveState)
	}
	w.br.Reset(c)
	w.bw.Reset(c)
	c.bw = w.bw
	c.answer = &w.answer
	keep := t.serveInput(c, w)
	c.answer = nil
	c.bw = nil
	w.br.Reset(nil)
	w.bw.Reset(nil)
	if c.fiber == nil {
		t.work.Put(w)
	}

	if c.detached {
		// The HTTP/2 server has it now (h2.go), and closes it.
		finished = true
		return
	}
	if keep {
		// From here another goroutine may serve the connection.
		c.idle()
	} else {
		c.finish()
	}
	finished = true
	t.served(c, -1)
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

// serveInput answers requests until the input the reader holds is drained.
// It reports whether the connection stays open.
func (t *reactorTransport) serveInput(c *clientConn, w *serveState) bool {
	for {
		if !t.serveOne(c, w) {
			return false
		}
		// The reader (or TLS) may already hold the next pipelined
		// request; what is still in the socket wakes the loop again.
		if w.br.Buffered() > 0 || c.tlsPending() {
			continue
		}
		return c.flushOut() == nil
	}
}

// serveOne reads, serves and writes one request. It reports whether the
// connection stays open; when it returns false the caller closes it.
func (t *reactorTransport) serveOne(c *clientConn, w *serveState) bool {
	req, resp := &w.req, &w.resp
	resp.Header.SetNoDefaultContentType(true)
	w.answer.Reset() // whatever an earlier request left, it is not this one's

	if c.tls != nil && t.o.HTTP2 != nil && !c.used.Load() && !c.tls.ConnectionState().HandshakeComplete {
		switch h2, err := t.handshakeForH2(c); {
		case err != nil:
			return t.drop(c, w)
		case h2:
			if t.handOffH2(c) != nil {
				return t.drop(c, w)
			}
			return false
		}
	}
	c.readPhase(t.o.HeaderTimeout)
	// The header scanner sees the section from its first byte: what the
	// reader holds already, then what each read brings.
	c.hdr.Start(t.readBufSize)
	if n := w.br.Buffered(); n > 0 {
		b, _ := w.br.Peek(n)
		c.hdr.Feed(b)
	}
	c.inHeader = true
	err := req.Header.Read(w.br)
	c.inHeader = false
	if err != nil {
		return t.fail(c, w, err)
	}
	if c.hdr.Bad() {
		// Parsed only because a CRLF CRLF followed later in the input;
		// refused all the same, so the answer never depends on how the
		// client's bytes were split.
		return t.fail(c, w, codec.ErrBareLFEnd)
	}
	c.used.Store(true)

	streamed, ok := t.readBody(c, w)
	if !ok {
		return false
	}

	// Taken before the handler, which may rewrite the request's headers.
	closeConn := req.Header.ConnectionClose()
	isHTTP11 := req.Header.IsHTTP11()
	isHead := req.Header.IsHead()

	if streamed && c.pending {
		// The handler reads the stream, perhaps while the answer is being
		// written; answers still held for earlier requests go out first.
		if err := c.flushOut(); err != nil {
			return t.drop(c, w)
		}
	}

	if t.serveRequest(c, req, resp) {
		closeConn = true
	}
	if resp.StatusCode() == fasthttp.StatusSwitchingProtocols && t.up != nil {
		if up := t.up.TakeUpgrade(resp); up != nil {
			if !streamed {
				return t.switchProtocols(c, w, up)
			}
			_ = up.Conn.Close() // a handshake has no body to stream
		}
	}
	if streamed {
		// What the handler left of the body is read and dropped, so that
		// the next request starts where this body ends; too much left, or
		// a broken body, and the connection closes instead.
		if closeConn || c.rerr != nil || !c.body.Discard(maxBodyDrain) {
			// Closing with the body unread: the client may still be
			// sending it.
			closeConn, c.linger = true, true
		}
		c.body = codec.Body{}
	}
	closeConn = closeConn || resp.Header.ConnectionClose() || c.rerr != nil || t.shut.Load()

	if closeConn {
		resp.Header.SetConnectionClose()
	} else if !isHTTP11 {
		resp.Header.SetCanonical(strConnection, strKeepAlive)
	}
	if isHead {
		resp.SkipBody = true
	}
	c.armWrite()
	switch {
	case resp.IsBodyStream() && !isHead:
		var keep bool
		keep, err = t.writeStreamed(c, w, resp, closeConn, isHTTP11)
		t.noteStream(err)
		closeConn = !keep
		w.answer.Reset()
	case w.answer.Active():
		err = w.answer.Write(w.bw, resp.Body(), closeConn, !isHTTP11, isHead)
		w.answer.Reset()
	default:
		err = resp.Write(w.bw)
	}
	req.Reset()
	resp.Reset() // closes a streamed body: its backend connection goes back or closes
	if err != nil {
		return false
	}
	if closeConn {
		_ = c.flushOut()
		return false
	}
	c.pending = true
	return true
}

// serveRequest hands a parsed request to the handler: on the fiber's
// loop in event-loop mode.
func (t *reactorTransport) serveRequest(c *clientConn, req *fasthttp.Request, resp *fasthttp.Response) bool {
	if c.fiber != nil && t.lh != nil {
		return t.lh.ServeOn(req, resp, c.peer, c.fiber)
	}
	return t.h.Serve(req, resp, c.peer)
}

// readBody reads the request body, whole up to streamBytes, or sets up a
// stream over the rest of a larger one. It reports whether the body is
// streamed, and ok=false after it has answered an error (the connection
// then closes).
func (t *reactorTransport) readBody(c *clientConn, w *serveState) (streamed, ok bool) {
	req := &w.req
	cl := req.Header.ContentLength()
	switch {
	case cl == 0:
		return false, true
	case cl == -2:
		// No Content-Length and no Transfer-Encoding: a request has no body.
		// ContinueReadBody only adjusts the header here, as fasthttp.Server does.
		_ = req.ContinueReadBody(w.br, 0, false)
		return false, true
	case cl > 0 && t.maxBody > 0 && int64(cl) > t.maxBody:
		// Refused before a byte of it is read, and before 100 Continue.
		return false, t.fail(c, w, codec.ErrBodyTooLarge)
	}

	if t.o.BodyTimeout > 0 {
		c.readPhase(t.o.BodyTimeout)
	}
	if req.MayContinue() {
		c.armWrite()
		_, _ = w.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
		if err := c.flushOut(); err != nil {
			return false, t.drop(c, w)
		}
	}

	if cl > 0 {
		if cl <= t.streamBytes {
			// Read whole, into a buffer that grows with the bytes that
			// arrive: a client claiming a large body and sending little of
			// it costs little.
			pre, err := readFixedBody(w.br, w.pre[:0], cl)
			w.pre = pre
			if err != nil {
				return false, t.fail(c, w, err)
			}
			req.SetBodyRaw(pre)
			return false, true
		}
		c.body.StartFixed(w.br, int64(cl))
		c.body.LimitedBy(c)
		req.SetBodyStream(&c.body, cl)
		return true, true
	}

	// Chunked: decoded here up to streamBytes, so that a small body is
	// checked whole (and a malformed one refused) before the handler runs;
	// a larger one is streamed, starting with what was decoded.
	c.body.StartChunked(w.br, t.maxBody, t.trailerBytes)
	c.body.LimitedBy(c)
	pre := w.pre[:0]
	for {
		if len(pre) == cap(pre) {
			pre = slices.Grow(pre, min(max(cap(pre), transport.MinBodyBuffer), t.streamBytes+1))
		}
		n, err := c.body.Read(pre[len(pre):cap(pre)])
		pre = pre[:len(pre)+n]
		if err == io.EOF {
			w.pre = pre
			c.body = codec.Body{}
			if len(pre) == 0 {
				req.Header.SetContentLength(0)
			} else {
				req.SetBodyRaw(pre)
			}
			return false, true
		}
		if err != nil {
			w.pre = pre
			c.body = codec.Body{}
			return false, t.fail(c, w, err)
		}
		if len(pre) > t.streamBytes {
			w.pre = pre
			c.body.SetPending(pre)
			req.SetBodyStream(&c.body, -1)
			return true, true
		}
	}
}

// fail answers a request that could not be read; the connection then
// closes. A client that went away gets no answer.
func (t *reactorTransport) fail(c *clientConn, w *serveState, err error) bool {
	var nothing fasthttp.ErrNothingRead
	if errors.Is(err, io.EOF) || errors.As(err, &nothing) || isGone(c.rerr) || c.tlsHandshakeFailed() {
		return t.drop(c, w)
	}
	c.body = codec.Body{}
	t.h.ServeError(err, &w.req, &w.resp, c.peer)
	w.resp.Header.SetConnectionClose()
	c.armWrite()
	if w.resp.Write(w.bw) == nil {
		_ = c.flushOut()
	}
	w.req.Reset()
	w.resp.Reset()
	// The rest of the request, or more of them, may still be on the way.
	c.linger = true
	return false
}

// drop gives up on the connection without answering.
func (t *reactorTransport) drop(c *clientConn, w *serveState) bool {
	c.body = codec.Body{}
	w.req.Reset()
	w.resp.Reset()
	return false
}

// readFixedBody appends a body of n bytes from br to dst, growing dst as the
// bytes arrive (doubling from transport.MinBodyBuffer), never to n ahead of them.
func readFixedBody(br *bufio.Reader, dst []byte, n int) ([]byte, error) {
	for len(dst) < n {
		if len(dst) == cap(dst) {
			dst = slices.Grow(dst, min(max(cap(dst), transport.MinBodyBuffer), n-len(dst)))
		}
		m, err := br.Read(dst[len(dst):min(cap(dst), n)])
		dst = dst[:len(dst)+m]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return dst, err
		}
	}
	return dst, nil
}

// sweep closes connections that waited too long for a request: one
// goroutine and one ticker for all connections.
func (t *reactorTransport) sweep() {
	defer close(t.sweepDone)
	tick := time.NewTicker(t.sweepTick)
	defer tick.Stop()
	var expired []*clientConn
	for {
		select {
		case <-t.stopSweep:
			return
		case <-tick.C:
		}
		now := t.now()
		t.clock.Store(now)
		t.mu.Lock()
		for c := range t.live {
			if c.state.Load() != connIdle {
				continue
			}
			wait := t.idleWait
			if !c.used.Load() {
				wait = t.firstWait
			}
			// last is read off the coarse clock, up to a tick early.
			if wait > 0 && now-c.last.Load() >= int64(wait+t.sweepTick) {
				expired = append(expired, c)
			}
		}
		t.mu.Unlock()
		for i, c := range expired {
			c.closeIfIdle()
			expired[i] = nil
		}
		expired = expired[:0]
	}
}

// shrinkBacklog sets a listening socket's accept queue to its minimum
// (listen(fd, 0)), so that during a drain the kernel stops completing
// connections the gateway is about to stop accepting.
func shrinkBacklog(ln net.Listener) {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) { _ = syscall.Listen(int(fd), 0) })
}

func (t *reactorTransport) noteCalls(how string) { t.calls.Store(&how) }

// IOUringLoops is how many event loops make their socket calls through an
// io_uring now.
func (t *reactorTransport) IOUringLoops() int { return int(t.ringLoops.Load()) }

// SocketCalls says how the event loops make their socket calls: in
// batches through an io_uring, or one syscall each and why; "" before the
// transport serves, and in dispatch mode.
func (t *reactorTransport) SocketCalls() string {
	if p := t.calls.Load(); p != nil {
		return *p
	}
	return ""
}
