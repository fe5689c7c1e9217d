package upstream

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/internal/stripe"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

// An instance's pool for the requests of one event loop. Only that loop's
// requests take and return its connections, one at a time, so the
// exchange is written for that case: the connection comes with the
// buffers it is read and written through, the deadlines are set once each,
// and the one clock read of an exchange serves all of them
// (fasthttp.HostClient, made for any goroutine, locks, draws buffers from
// pools and reads the clock about nine times per exchange). The idle list
// has a lock all the same: the sweep that closes connections idle past
// IdleConn, and the instance's close on a reload, run elsewhere.
//
// A request that finds MaxConns connections busy parks on the loop (never
// blocks it) until one is handed over or MaxConnWait passes.
//
// An idle connection is kept up to the pool's ceiling (idle_conn), less
// when its backend announced a shorter keep-alive timeout with its last
// answer, and it carries no request once idle longer than the backend was
// seen to keep one (Instance.idle): a request sent on a connection the
// backend is closing fails, and only an idempotent one goes again.
type loopPool struct {
	_       stripe.Pad // one loop writes it: no line shared with a neighbour
	in      *Instance
	loop    pipeline.Loop
	ceiling time.Duration // the longest a connection is kept idle

	busy  int // loop only
	limit int
	wait  pipeline.ParkQueue

	// hc serves services whose answers stream (stream_response): a
	// streamed body outlives the exchange, and hands the
	// connection back to hc's pool when it is closed (clientStream).
	hc *fasthttp.HostClient
	// now is the loop's clock, for the deadlines of streamed answers.
	now func() time.Time

	mu       sync.Mutex
	idle     []*loopConn // most recently used last
	closed   bool
	sweeping bool
	open     atomic.Int64
	_        stripe.Pad
}

// loopConn is a pooled connection and its buffers.
type loopConn struct {
	conn   net.Conn
	br     *bufio.Reader
	bw     *bufio.Writer
	idleAt time.Time
	// announced is the keep-alive timeout of the backend's last answer
	// (Keep-Alive: timeout=N), -1 for none.
	announced time.Duration
	// body streams an answer longer than the pool's window.
	body answerBody
	pool *loopPool
}

// streamEnded implements streamOwner: the streamed answer's connection
// goes back to the pool or closes, and the pool's slot is free.
func (lc *loopConn) streamEnded(reuse bool) {
	lp := lc.pool
	if reuse {
		lp.put(lc, lp.loop.Now())
	} else {
		lp.drop(lc)
	}
	lp.release()
}

// hangUpClock is a connection that knows when the backend hung up (a
// loop's): zero until it did.
type hangUpClock interface{ HungUpAt() time.Time }

// sweepEvery bounds the time between sweeps of a pool with idle
// connections, so that those the backend closed are let go and learned
// from soon even when the ceiling is long.
const sweepEvery = 5 * time.Second

// Buffer sizes of an upstream connection, as the common pool's.
const (
	upReadBuffer  = 8 << 10
	upWriteBuffer = 8 << 10
)

func newLoopPool(in *Instance, loop pipeline.Loop) *loopPool {
	lp := &loopPool{in: in, loop: loop, limit: in.pool.MaxConns, ceiling: in.keeping.ceiling, now: loop.Now}
	if in.pool.StreamResponse {
		connect := in.pool.Connect
		lp.hc = in.newClient(func(a string) (net.Conn, error) {
			c, err := loop.Dial(a, connect)
			if err != nil {
				return nil, err
			}
			return guard(c, &in.keeping), nil
		})
		// The pool's limit is enforced by acquire, which parks on the
		// loop: the client itself must never wait for a connection,
		// which would block the loop. Its own bound is only a margin
		// above the gate's.
		lp.hc.MaxConns = 2 * lp.limit
	}
	return lp
}

// acquire takes one of the pool's connection slots for c, waiting on c's
// loop for up to maxWait; false when none was free in time.
func (lp *loopPool) acquire(c *pipeline.Ctx, maxWait time.Duration) bool {
	if lp.busy < lp.limit {
		lp.busy++
		return true
	}
	// Woken, the request inherits the waker's connection slot.
	return c.Loop.Park(&lp.wait, maxWait)
}

// release gives the slot back, to the first request waiting if any.
func (lp *loopPool) release() {
	if !lp.wait.WakeOne() {
		lp.busy--
	}
}

// do is one exchange on the loop: c.Req to the instance, its answer into
// c.Resp. A kept-alive connection the backend had closed in the meantime
// (its close not yet seen) fails before any byte of an answer; an
// idempotent request then goes again, once, on a new connection.
//
// streaming reports an answer whose body streams (answerBody): its
// connection and the pool's slot are held until the transport closes the
// body, and are not the caller's to release.
func (lp *loopPool) do(c *pipeline.Ctx, deadline time.Time) (streaming bool, err error) {
	if lp.hc != nil {
		return false, doGuarded(lp.hc, &lp.in.keeping, c, deadline, &lp.in.pool)
	}
	now := c.Now()
	for attempt := 0; ; attempt++ {
		lc, reused, err := lp.take(now)
		if err != nil {
			return false, err
		}
		streaming, err, unanswered := lp.roundTrip(lc, c, now, deadline)
		if err == nil {
			return streaming, nil
		}
		lp.drop(lc)
		if attempt > 0 || !reused || !unanswered || c.Req.IsBodyStream() || !idempotent(&c.Req.Header, false) {
			return false, err
		}
	}
}

// roundTrip writes the request and reads the answer on lc; unanswered
// reports a failure before any byte of an answer (the connection was
// found closed).
func (lp *loopPool) roundTrip(lc *loopConn, c *pipeline.Ctx, now, deadline time.Time) (streaming bool, err error, unanswered bool) {
	p := &lp.in.pool
	req, resp := c.Req, c.Resp
	_ = lc.conn.SetWriteDeadline(sooner(deadline, now, p.Write))
	err = codec.WriteRequest(lc.bw, req, &c.Fields)
	if err == nil {
		err = lc.bw.Flush()
	}
	if err != nil {
		return false, err, true
	}
	_ = lc.conn.SetReadDeadline(sooner(deadline, now, p.Read))
	resp.Reset()
	resp.Header.SetNoDefaultContentType(true) // as every transport serves
	resp.SkipBody = req.Header.IsHead()
	taken, unframed := false, false
	if c.Answer != nil {
		// The common answer is kept as read; Read leaves any other for
		// fasthttp's parser.
		if taken, err = c.Answer.Read(lc.br, resp, p.MaxResponseBytes, p.AnswerWindow, resp.SkipBody, now); err != nil {
			c.Answer.Reset()
			return false, err, false
		}
		if taken && c.Answer.Streamed() {
			b := &lc.body
			b.body.StartFixed(lc.br, int64(resp.Header.ContentLength()))
			b.untilClose, b.reusable, b.ended, b.err = false, !c.Answer.Close(), false, nil
			resp.SetBodyStream(b, resp.Header.ContentLength())
			streaming = true
		}
	}
	if !taken {
		if streaming, unframed, err = readAnswer(&lc.body, resp, p.MaxResponseBytes); err != nil {
			return false, err, lc.br.Buffered() == 0 && closedEarly(err)
		}
	}
	if streaming {
		lc.body.start(lc)
	}
	lc.announced = -1
	if taken {
		if d, ok := c.Answer.KeepAlive(); ok {
			lc.announced = d
		}
	} else if d, ok := announcedKeepAlive(&resp.Header); ok {
		lc.announced = d
	}
	if streaming {
		return true, nil, false // the body keeps lc until the transport closes it
	}
	// The request sent never asks to close (the forwarding step drops the
	// client's Connection field); the backend may. Bytes behind the answer
	// are nothing a request asked for.
	if unframed || resp.ConnectionClose() || taken && c.Answer.Close() || lc.br.Buffered() > 0 {
		lp.drop(lc)
		return false, nil, false
	}
	lp.put(lc, c.Now()) // idle from now, not from the exchange's start
	return false, nil, false
}

// keptFor is how long lc is kept idle: the ceiling, or less when the
// backend announced a shorter keep-alive timeout.
func (lp *loopPool) keptFor(lc *loopConn) time.Duration {
	if lc.announced >= 0 {
		return min(lp.ceiling, keepBelow(lc.announced))
	}
	return lp.ceiling
}

// usableFor is how long lc may be idle and still carry a request: keptFor,
// or less when the backend was seen closing idle connections sooner. Past
// it the connection carries no request; the sweep leaves it for the
// backend to close (up to keptFor), which renews what was learned.
func (lp *loopPool) usableFor(lc *loopConn, now time.Time) time.Duration {
	d := lp.keptFor(lc)
	if l := lp.in.idle.get(now); l > 0 && l < d {
		return l
	}
	return d
}

// hungUp reports that the backend closed lc while it was idle, and learns
// from how long it had been idle.
func (lp *loopPool) hungUp(lc *loopConn) bool {
	h, ok := lc.conn.(hangUpClock)
	if !ok {
		return false
	}
	at := h.HungUpAt()
	if at.IsZero() {
		return false
	}
	lp.in.idle.closed(at.Sub(lc.idleAt), lp.ceiling, at)
	return true
}

// take returns an idle connection (the most recently used that is still
// open), or a new one dialled on the loop.
func (lp *loopPool) take(now time.Time) (lc *loopConn, reused bool, err error) {
	lp.mu.Lock()
	for n := len(lp.idle); n > 0; n = len(lp.idle) {
		lc = lp.idle[n-1]
		lp.idle[n-1] = nil
		lp.idle = lp.idle[:n-1]
		if s, ok := lc.conn.(staleConn); (ok && s.Stale()) || now.Sub(lc.idleAt) > lp.usableFor(lc, now) {
			lp.mu.Unlock()
			lp.hungUp(lc)
			lp.drop(lc)
			lp.mu.Lock()
			continue
		}
		lp.mu.Unlock()
		return lc, true, nil
	}
	lp.mu.Unlock()
	conn, err := lp.loop.Dial(lp.in.Addr, lp.in.pool.Connect)
	if err != nil {
		return nil, false, err
	}
	lp.open.Add(1)
	lc = &loopConn{conn: conn, br: bufio.NewReaderSize(conn, upReadBuffer), bw: bufio.NewWriterSize(conn, upWriteBuffer), announced: -1, pool: lp}
	lc.body.on(lc.br, conn, lp.now, &lp.in.pool, lp.in.pool.AnswerWindow)
	return lc, false, nil
}

// put keeps lc for the loop's next request.
func (lp *loopPool) put(lc *loopConn, now time.Time) {
	lc.idleAt = now
	lp.mu.Lock()
	if lp.closed || lp.keptFor(lc) == 0 {
		lp.mu.Unlock()
		lp.drop(lc)
		return
	}
	lp.idle = append(lp.idle, lc)
	sweep := !lp.sweeping
	lp.sweeping = true
	lp.mu.Unlock()
	if sweep {
		time.AfterFunc(min(lp.ceiling, sweepEvery), lp.sweep)
	}
}

// drop closes lc.
func (lp *loopPool) drop(lc *loopConn) {
	_ = lc.conn.Close()
	lp.open.Add(-1)
}

// sweep closes the connections the backend closed (learning from them)
// and those idle past keptFor, and comes back while any is left.
func (lp *loopPool) sweep() {
	now := time.Now()
	var expired []*loopConn
	lp.mu.Lock()
	kept := lp.idle[:0]
	for _, lc := range lp.idle {
		if lp.hungUp(lc) || now.Sub(lc.idleAt) > lp.keptFor(lc) {
			expired = append(expired, lc)
		} else {
			kept = append(kept, lc)
		}
	}
	clear(lp.idle[len(kept):])
	lp.idle = kept
	again := len(lp.idle) > 0 && !lp.closed
	lp.sweeping = again
	lp.mu.Unlock()
	for _, lc := range expired {
		lp.drop(lc)
	}
	if again {
		time.AfterFunc(min(lp.ceiling, sweepEvery), lp.sweep)
	}
}

// closeIdle closes the idle connections; with stop, the pool keeps none
// from now on (the instance is being dropped).
func (lp *loopPool) closeIdle(stop bool) {
	lp.mu.Lock()
	idle := lp.idle
	lp.idle = nil
	if stop {
		lp.closed = true
	}
	lp.mu.Unlock()
	for _, lc := range idle {
		lp.drop(lc)
	}
	if lp.hc != nil {
		lp.hc.CloseIdleConnections()
	}
}

// conns reports the pool's open connections.
func (lp *loopPool) conns() int {
	if lp.hc != nil {
		return lp.hc.ConnsCount()
	}
	return int(lp.open.Load())
}

// sooner is deadline, or now+d when that comes first (d > 0).
func sooner(deadline, now time.Time, d time.Duration) time.Time {
	if d > 0 {
		if t := now.Add(d); deadline.IsZero() || t.Before(deadline) {
			return t
		}
	}
	return deadline
}

// closedEarly reports a read that found the connection closed or reset
// before an answer began (a cut-short answer is not one).
func closedEarly(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, fasthttp.ErrConnectionClosed)
}
