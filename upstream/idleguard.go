package upstream

import (
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/internal/sockpeek"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

// errUnsolicited is a pooled connection on which the backend sent bytes
// no request asked for: found before any byte of a request went out, so
// the request may go again on another connection, whatever its method.
var errUnsolicited = errors.New("upstream: the backend sent bytes on an idle connection")

// guardedConn is a connection of fasthttp's pool that looks, before each
// write, whether the backend sent anything since its last answer: a
// backend that writes more than its answer (or a second answer) would
// otherwise have those bytes read as the answer to the next request on
// the connection, someone else's. fasthttp's client reads each answer
// through a pooled reader and drops what is left in it, so it neither
// sees them nor keeps the connection from carrying another request.
// The loop's own pool drops such connections when it takes them (they
// report it: Stale); its fasthttp client for streamed answers looks
// through this guard too.
//
// The same look keeps fasthttp's pool to the backend's idle timeout, as
// the loops' pools keep to it (idleLearner): a connection found closed by
// the backend is learned from (its idle time then, an upper bound of the
// backend's), and one idle as long as the backend is known to keep one
// (announced or seen) carries no request. Either is found before any byte
// of a request went out.
//
// Only a request's first write looks: after it, an answer may come early
// (a 413 while the body is still being sent), which fasthttp reads once
// the request is written.
type guardedConn struct {
	net.Conn
	look       func() (pending, closed bool) // whether the backend sent anything, or hung up
	read       bool                          // an answer was read since the last write: the next write begins a request
	idle       *idleKeeping
	answeredAt time.Time // when the last read returned
}

// idleKeeping is how long an instance's backend keeps an idle connection,
// as the guarded connections of fasthttp's client learn and obey it: the
// closes seen (shared with the loops' pools), and the keep-alive timeout
// the last answer announced. Of the two the shorter holds, as for a
// connection of a loop's pool (loopPool.usableFor).
type idleKeeping struct {
	learned *idleLearner
	ceiling time.Duration // the pool's own limit: a close at or past it teaches nothing
	// announced is keepBelow of the last answer's announced timeout plus
	// 1 ns (timeout=0 keeps none), 0 when it announced none. Answers rarely
	// change it, so it is written only when they do: a line shared by
	// every request to the instance is not written per request.
	announced atomic.Int64
}

// announce notes what an answer announced (ok false: nothing).
func (k *idleKeeping) announce(d time.Duration, ok bool) {
	v := int64(0)
	if ok {
		v = int64(keepBelow(d)) + 1
	}
	if k.announced.Load() != v {
		k.announced.Store(v)
	}
}

// limit is how long a connection may have been idle and still carry a
// request at now; ok is false when nothing is known but the ceiling.
func (k *idleKeeping) limit(now time.Time) (d time.Duration, ok bool) {
	if a := k.announced.Load(); a > 0 {
		d, ok = time.Duration(a-1), true
	}
	if l := k.learned.get(now); l > 0 && (!ok || l < d) {
		d, ok = l, true
	}
	return d, ok
}

// errIdlePast is a pooled connection idle as long as the backend is known
// to keep one: a request on it could cross the backend's close. Found
// before any byte of a request went out, like errUnsolicited.
var errIdlePast = errors.New("upstream: the connection was idle as long as the backend keeps one")

// staleConn is a connection that tells for itself whether the backend
// sent anything (or hung up) since its last answer: a loop's (netpoll).
type staleConn interface {
	net.Conn
	Stale() bool
	HungUpAt() time.Time
}

func (g *guardedConn) Read(p []byte) (int, error) {
	n, err := g.Conn.Read(p)
	g.read = true
	g.answeredAt = time.Now()
	return n, err
}

func (g *guardedConn) Write(p []byte) (int, error) {
	if g.read {
		g.read = false
		if err := g.check(); err != nil {
			return 0, err
		}
	}
	return g.Conn.Write(p)
}

// check is the look before a request's first byte.
func (g *guardedConn) check() error {
	pending, closed := g.look()
	now := time.Now()
	idleFor := now.Sub(g.answeredAt)
	if pending {
		if closed {
			g.idle.learned.foundClosed(idleFor, g.idle.ceiling, now)
		}
		return errUnsolicited
	}
	if l, ok := g.idle.limit(now); ok && idleFor >= l {
		return errIdlePast
	}
	return nil
}

// doGuarded is hc's exchange of c's request, again on another connection
// while the one taken had bytes no request asked for, was closed by the
// backend, or was idle too long: nothing of the request went out on it
// (a streamed body may have been read into the writer's buffer, so such a
// request is not sent again). Each retry drops a pooled connection, so
// there are at most as many as the pool holds before one is dialled.
// What the answer announces of its keep-alive timeout (the shortest, of
// every Keep-Alive field) is noted in idle.
func doGuarded(hc *fasthttp.HostClient, idle *idleKeeping, c *pipeline.Ctx, deadline time.Time, p *Pool) error {
	window := p.AnswerWindow
	if p.StreamResponse {
		window = 0 // every body streams
	}
	err := clientExchange(hc, c, deadline, p, window)
	for tries := 0; tries <= hc.MaxConns && (errors.Is(err, errUnsolicited) || errors.Is(err, errIdlePast)) &&
		!c.Req.IsBodyStream(); tries++ {
		err = clientExchange(hc, c, deadline, p, window)
	}
	if err == nil {
		idle.announce(announcedKeepAlive(&c.Resp.Header))
	}
	return err
}

// announcedKeepAlive is the keep-alive timeout an answer fasthttp read
// announces: the shortest of every Keep-Alive field's, as codec.Answer
// reads it.
func announcedKeepAlive(h *fasthttp.ResponseHeader) (d time.Duration, ok bool) {
	for _, v := range h.PeekAll("Keep-Alive") {
		if t, valid := codec.KeepAliveTimeout(v); valid && (!ok || t < d) {
			d, ok = t, true
		}
	}
	return d, ok
}

// guard wraps c when its socket can be looked at; the check is bound
// once per connection, which also keeps to the backend's idle timeout as
// idle knows it.
func guard(c net.Conn, idle *idleKeeping) net.Conn {
	if s, ok := c.(staleConn); ok {
		return &guardedConn{Conn: c, idle: idle, answeredAt: time.Now(), look: func() (bool, bool) {
			if !s.Stale() {
				return false, false
			}
			return true, !s.HungUpAt().IsZero()
		}}
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &guardedConn{Conn: c, idle: idle, answeredAt: time.Now(), look: socketPending(rc)}
}

// socketPending looks at rc's input through Control, not Read: the look
// never waits, so it needs none of the poller's read preparation. closed
// is the end of input or an error (a reset).
func socketPending(rc syscall.RawConn) func() (pending, closed bool) {
	var n int
	var errno syscall.Errno
	peek := func(fd uintptr) { n, errno = sockpeek.Byte(fd) }
	return func() (bool, bool) {
		n, errno = 0, syscall.EAGAIN
		if rc.Control(peek) != nil || errno == syscall.EAGAIN {
			return false, false
		}
		return true, n == 0
	}
}
