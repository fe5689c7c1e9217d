package server

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
	"time"

	"github.com/cloudwego/netpoll"
	"github.com/tollgate/tollgate/codec"
	"github.com/valyala/fasthttp"
)

// netpollTransport serves clients from netpoll's epoll reactor and parses
// them with fasthttp's types. A connection holds no goroutine and no parse
// buffers while it waits between requests: OnRequest runs only when bytes
// arrive, takes a reader, a writer and a request/response pair from a pool,
// answers everything the input holds (pipelined requests included), flushes
// once and gives them back.
//
// Idle and first-request timeouts are enforced by one sweeper goroutine per
// transport; the header, body and write timeouts by netpoll's per-connection
// deadlines while a request is being served.
type netpollTransport struct {
	h Handler
	o Options

	readBufSize  int   // bufio.Reader size: request line + header limit
	maxBody      int64 // body limit, 0 for none
	streamBytes  int   // bodies above this are streamed
	trailerBytes int   // chunked trailer section limit

	firstWait time.Duration // new connection: longest wait for a request
	idleWait  time.Duration // keep-alive connection: longest wait
	sweepTick time.Duration // 0: no sweeper

	epoch time.Time    // origin of the transport's monotonic clock
	clock atomic.Int64 // coarse clock, set by the sweeper every sweepTick
	work  sync.Pool    // *npWork

	conns    atomic.Int64 // open, admitted connections
	inflight atomic.Int64 // OnRequest calls running
	shut     atomic.Bool

	mu    sync.Mutex
	live  map[*npConn]struct{} // admitted connections, for the sweeper and Shutdown
	loops []*npLoop

	sweepOnce sync.Once
	stopOnce  sync.Once
	stopSweep chan struct{}
	sweepDone chan struct{}
}

// npLoop is one Serve call: its event loop and a channel closed when Serve
// returns.
type npLoop struct {
	evl  netpoll.EventLoop
	done chan struct{}
}

// npWork is what an active OnRequest call borrows from the pool.
type npWork struct {
	br   *bufio.Reader
	bw   *bufio.Writer
	req  fasthttp.Request
	resp fasthttp.Response
	pre  []byte // a chunked body decoded before the handler (up to streamBytes)
}

const (
	// npWriteBufSize is the bufio.Writer size; larger writes go straight to
	// the connection's output buffer.
	npWriteBufSize = 4096
	// npFlushBytes is how much output a connection batches (pipelined
	// answers, or a large answer) before it flushes without waiting for
	// the input to drain.
	npFlushBytes = 64 << 10
	// npMaxDrain is how much of a streamed body the handler left unread the
	// transport reads and drops to keep the connection; beyond it, it closes.
	npMaxDrain = 256 << 10

	npDefaultHeaderBytes = 8192 // Options.MaxHeaderBytes when unset
	npDefaultURIBytes    = 4096 // Options.MaxURIBytes when unset
)

// Connection states. Only OnRequest moves idle→busy; the sweeper and
// Shutdown move idle→closed, so a request that has started is never cut by
// them.
const (
	npIdle int32 = iota
	npBusy
	npClosed
)

var (
	strNpConnection = []byte("Connection")
	strNpKeepAlive  = []byte("keep-alive")
)

// npConfigureOnce guards netpoll.Configure: its settings are process-wide
// and must be set before connections exist, so only the first transport
// sets them.
var npConfigureOnce sync.Once

func newNetpollTransport(h Handler, o Options) (Transport, error) {
	if runtime.GOOS == "windows" {
		return nil, errors.New("netpoll transport is not supported on windows (use fasthttp)")
	}
	if h == nil {
		return nil, errors.New("netpoll transport: nil handler")
	}
	var cfgErr error
	npConfigureOnce.Do(func() {
		cfg := netpoll.Config{
			PollerNum:   o.Workers,
			LoadBalance: netpoll.RoundRobin,
			// netpoll's default runner is a goroutine pool whose workers
			// exit as soon as its queue is empty, so under keep-alive
			// traffic it starts a goroutine per request anyway and adds its
			// queue on top: starting the goroutine directly measured 7 %
			// more requests per second on one core (bench/RESULTS.md).
			Runner: func(_ context.Context, f func()) { go f() },
		}
		cfgErr = netpoll.Configure(cfg)
	})
	if cfgErr != nil {
		return nil, cfgErr
	}

	sized := o
	if sized.MaxHeaderBytes <= 0 {
		sized.MaxHeaderBytes = npDefaultHeaderBytes
	}
	if sized.MaxURIBytes <= 0 {
		sized.MaxURIBytes = npDefaultURIBytes
	}
	t := &netpollTransport{
		h:            h,
		o:            o,
		readBufSize:  sized.readBufferSize(),
		maxBody:      max(o.MaxBodyBytes, 0),
		streamBytes:  o.StreamBodyBytes,
		trailerBytes: sized.MaxHeaderBytes,
		epoch:        time.Now(),
		live:         make(map[*npConn]struct{}),
		stopSweep:    make(chan struct{}),
		sweepDone:    make(chan struct{}),
	}
	if t.streamBytes <= 0 {
		t.streamBytes = fasthttp.DefaultMaxRequestBodySize
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
		return &npWork{
			br: bufio.NewReaderSize(nil, t.readBufSize),
			bw: bufio.NewWriterSize(nil, npWriteBufSize),
		}
	}
	return t, nil
}

// Serve implements Transport.
func (t *netpollTransport) Serve(ln net.Listener) error {
	npln, err := netpoll.ConvertListener(ln)
	if err != nil {
		return err
	}
	evl, err := netpoll.NewEventLoop(t.onRequest,
		netpoll.WithOnPrepare(t.onPrepare),
		netpoll.WithOnConnect(t.onConnect),
	)
	if err != nil {
		_ = npln.Close()
		return err
	}
	if evl == nil {
		_ = npln.Close()
		return errors.New("netpoll transport is not supported on this platform")
	}
	l := &npLoop{evl: evl, done: make(chan struct{})}
	defer close(l.done)

	t.mu.Lock()
	if t.shut.Load() {
		t.mu.Unlock()
		_ = npln.Close()
		return nil
	}
	t.loops = append(t.loops, l)
	t.mu.Unlock()
	if t.sweepTick > 0 {
		t.sweepOnce.Do(func() {
			t.clock.Store(t.now())
			go t.sweep()
		})
	}

	err = evl.Serve(npln)
	if t.shut.Load() {
		return nil
	}
	return err
}

// Shutdown implements Transport.
func (t *netpollTransport) Shutdown(ctx context.Context) error {
	t.mu.Lock()
	t.shut.Store(true)
	loops := t.loops
	t.loops = nil
	idle := make([]*npConn, 0, len(t.live))
	for c := range t.live {
		if c.state.Load() == npIdle {
			idle = append(idle, c)
		}
	}
	t.mu.Unlock()
	defer t.stopSweeper()

	// Idle connections go now; busy ones close after their answer, which
	// carries Connection: close.
	for _, c := range idle {
		c.closeIfIdle()
	}

	var err error
	for i, l := range loops {
		// The event loop's Shutdown stops accepting, closes idle
		// connections and waits for the others. If Serve has not yet handed
		// the listener to the loop it does nothing, so ask again until Serve
		// has returned.
		for done := false; !done; {
			if e := l.evl.Shutdown(ctx); e != nil && err == nil {
				err = e
			}
			select {
			case <-l.done:
				done = true
			case <-ctx.Done():
				// Out of time: the other listeners still stop accepting.
				for _, rest := range loops[i+1:] {
					_ = rest.evl.Shutdown(ctx)
				}
				return ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	for t.inflight.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return err
}

// Conns implements Transport.
func (t *netpollTransport) Conns() int { return int(t.conns.Load()) }

// now reads the transport's monotonic clock; connections record their last
// activity off the coarse copy in clock.
func (t *netpollTransport) now() int64 { return int64(time.Since(t.epoch)) }

// admit counts a new connection unless MaxConns are already open.
func (t *netpollTransport) admit() bool {
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

// onPrepare runs on the poller for each accepted connection, before it is
// registered: it allocates the connection's state, once.
func (t *netpollTransport) onPrepare(conn netpoll.Connection) context.Context {
	c := &npConn{
		Context: context.Background(),
		t:       t,
		conn:    conn,
		rd:      conn.Reader(),
		wr:      conn.Writer(),
		peer:    peerOf(conn.RemoteAddr()),
	}
	c.last.Store(t.clock.Load())
	c.counted = t.admit()
	if c.counted {
		t.mu.Lock()
		t.live[c] = struct{}{}
		t.mu.Unlock()
	} else {
		c.state.Store(npClosed)
	}
	_ = conn.AddCloseCallback(c.onClose)
	return c
}

// onConnect closes connections over MaxConns or arriving during Shutdown.
// (Closing them in onPrepare, before registration, makes netpoll log a
// failed detach.)
func (t *netpollTransport) onConnect(ctx context.Context, conn netpoll.Connection) context.Context {
	c, ok := ctx.(*npConn)
	if !ok || !c.counted || t.shut.Load() {
		if ok {
			c.state.Store(npClosed)
		}
		_ = conn.Close()
	}
	return ctx
}

// onRequest runs when input arrives on an idle connection. It answers every
// request the input holds and returns once it is drained, or after closing
// the connection; it never leaves unread input on an open connection
// (netpoll would call it again at once, forever).
func (t *netpollTransport) onRequest(ctx context.Context, conn netpoll.Connection) error {
	c, ok := ctx.(*npConn)
	if !ok || !c.state.CompareAndSwap(npIdle, npBusy) {
		// Closed by the sweeper or Shutdown just before the bytes came.
		return conn.Close()
	}
	t.inflight.Add(1)
	finished := false
	defer func() {
		if !finished { // the handler panicked: keep the books right
			c.state.Store(npClosed)
			_ = conn.Close()
			t.inflight.Add(-1)
		}
	}()

	w := t.work.Get().(*npWork)
	w.br.Reset(c)
	w.bw.Reset(c)
	c.bw = w.bw
	keep := t.serveInput(c, w)
	c.bw = nil
	w.br.Reset(nil)
	w.bw.Reset(nil)
	t.work.Put(w)

	if keep {
		c.last.Store(t.clock.Load())
		c.state.Store(npIdle)
		if t.shut.Load() {
			c.closeIfIdle()
		}
	} else {
		c.state.Store(npClosed)
	}
	finished = true
	t.inflight.Add(-1)
	return nil
}

// serveInput answers requests until the input is drained. It reports
// whether the connection stays open.
func (t *netpollTransport) serveInput(c *npConn, w *npWork) bool {
	for {
		if !t.serveOne(c, w) {
			return false
		}
		// fasthttp may already hold the next pipelined request in the
		// bufio.Reader, where netpoll cannot see it: keep going while any
		// input is left, in either buffer.
		if w.br.Buffered() > 0 || c.rd.Len() > 0 {
			continue
		}
		if err := c.flushOut(); err != nil {
			_ = c.conn.Close()
			return false
		}
		return true
	}
}

// serveOne reads, serves and writes one request. It reports whether the
// connection stays open; when it returns false the connection is closed.
func (t *netpollTransport) serveOne(c *npConn, w *npWork) bool {
	req, resp := &w.req, &w.resp
	resp.Header.SetNoDefaultContentType(true)

	c.readPhase(t.o.HeaderTimeout)
	if err := req.Header.Read(w.br); err != nil {
		return t.fail(c, w, err)
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

	if t.h.Serve(req, resp, c.peer) {
		closeConn = true
	}
	if streamed {
		// What the handler left of the body is read and dropped, so that
		// the next request starts where this body ends; too much left, or
		// a broken body, and the connection closes instead.
		if !closeConn && (c.rerr != nil || !c.body.discard(npMaxDrain)) {
			closeConn = true
		}
		c.body = npBody{}
	}
	closeConn = closeConn || resp.Header.ConnectionClose() || c.rerr != nil || t.shut.Load()

	if closeConn {
		resp.Header.SetConnectionClose()
	} else if !isHTTP11 {
		resp.Header.SetCanonical(strNpConnection, strNpKeepAlive)
	}
	if isHead {
		resp.SkipBody = true
	}
	c.armWrite()
	err := resp.Write(w.bw)
	req.Reset()
	resp.Reset()
	if err != nil {
		_ = c.conn.Close()
		return false
	}
	if closeConn {
		_ = c.flushOut()
		_ = c.conn.Close()
		return false
	}
	c.pending = true
	return true
}

// readBody reads the request body, whole up to streamBytes, or sets up a
// stream over the rest of a larger one. It reports whether the body is
// streamed, and ok=false after it has answered an error and closed.
func (t *netpollTransport) readBody(c *npConn, w *npWork) (streamed, ok bool) {
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
			if err := req.ContinueReadBody(w.br, t.streamBytes, false); err != nil {
				return false, t.fail(c, w, err)
			}
			return false, true
		}
		c.body.startFixed(w.br, int64(cl))
		req.SetBodyStream(&c.body, cl)
		return true, true
	}

	// Chunked: decoded here up to streamBytes, so that a small body is
	// checked whole (and a malformed one refused) before the handler runs;
	// a larger one is streamed, starting with what was decoded.
	c.body.startChunked(w.br, t.maxBody, t.trailerBytes)
	pre := w.pre[:0]
	for {
		if len(pre) == cap(pre) {
			pre = slices.Grow(pre, min(max(cap(pre), 4096), t.streamBytes+1))
		}
		n, err := c.body.Read(pre[len(pre):cap(pre)])
		pre = pre[:len(pre)+n]
		if err == io.EOF {
			w.pre = pre
			c.body = npBody{}
			if len(pre) == 0 {
				req.Header.SetContentLength(0)
			} else {
				req.SetBody(pre)
			}
			return false, true
		}
		if err != nil {
			w.pre = pre
			c.body = npBody{}
			return false, t.fail(c, w, err)
		}
		if len(pre) > t.streamBytes {
			w.pre = pre
			c.body.pre = pre
			req.SetBodyStream(&c.body, -1)
			return true, true
		}
	}
}

// fail answers a request that could not be read, then closes. A client that
// went away gets no answer.
func (t *netpollTransport) fail(c *npConn, w *npWork, err error) bool {
	var nothing fasthttp.ErrNothingRead
	if errors.Is(err, io.EOF) || errors.As(err, &nothing) ||
		errors.Is(c.rerr, io.EOF) || errors.Is(c.rerr, net.ErrClosed) {
		return t.drop(c, w)
	}
	c.body = npBody{}
	t.h.ServeError(err, &w.req, &w.resp, c.peer)
	w.resp.Header.SetConnectionClose()
	c.armWrite()
	if w.resp.Write(w.bw) == nil {
		_ = c.flushOut()
	}
	w.req.Reset()
	w.resp.Reset()
	_ = c.conn.Close()
	return false
}

// drop closes without answering.
func (t *netpollTransport) drop(c *npConn, w *npWork) bool {
	c.body = npBody{}
	w.req.Reset()
	w.resp.Reset()
	_ = c.conn.Close()
	return false
}

// sweep closes connections that waited too long for a request: one
// goroutine and one ticker for all connections.
func (t *netpollTransport) sweep() {
	defer close(t.sweepDone)
	tick := time.NewTicker(t.sweepTick)
	defer tick.Stop()
	var expired []*npConn
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
			if c.state.Load() != npIdle {
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

func (t *netpollTransport) stopSweeper() {
	t.stopOnce.Do(func() { close(t.stopSweep) })
	started := true
	t.sweepOnce.Do(func() { started = false })
	if started {
		<-t.sweepDone
	}
}
