package upstream

import (
	"errors"
	"net"
	"syscall"
	"time"

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
// Only a request's first write looks: after it, an answer may come early
// (a 413 while the body is still being sent), which fasthttp reads once
// the request is written.
type guardedConn struct {
	net.Conn
	stale func() bool // whether the backend sent anything (or hung up)
	read  bool        // an answer was read since the last write: the next write begins a request
}

// staleConn is a connection that tells for itself whether the backend
// sent anything (or hung up) since its last answer: a loop's (netpoll).
type staleConn interface {
	net.Conn
	Stale() bool
}

func (g *guardedConn) Read(p []byte) (int, error) {
	g.read = true
	return g.Conn.Read(p)
}

func (g *guardedConn) Write(p []byte) (int, error) {
	if g.read {
		g.read = false
		if g.stale() {
			return 0, errUnsolicited
		}
	}
	return g.Conn.Write(p)
}

// doGuarded is hc's exchange of c's request, once more on another
// connection when the one it took had bytes no request asked for.
func doGuarded(hc *fasthttp.HostClient, c *pipeline.Ctx, deadline time.Time) error {
	err := hc.DoDeadline(c.Req, c.Resp, deadline)
	if errors.Is(err, errUnsolicited) && !c.Req.IsBodyStream() {
		// Nothing of the request went out (a streamed body may have been
		// read into the writer's buffer): again, on another connection.
		err = hc.DoDeadline(c.Req, c.Resp, deadline)
	}
	return err
}

// guard wraps c when its socket can be looked at; the check is bound
// once per connection.
func guard(c net.Conn) net.Conn {
	if s, ok := c.(staleConn); ok {
		return &guardedConn{Conn: c, stale: s.Stale}
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &guardedConn{Conn: c, stale: socketPending(rc)}
}

// socketPending looks at rc's input through Control, not Read: the look
// never waits, so it needs none of the poller's read preparation.
func socketPending(rc syscall.RawConn) func() bool {
	var pending bool
	peek := func(fd uintptr) { pending = sockpeek.Pending(fd) }
	return func() bool {
		pending = false
		return rc.Control(peek) == nil && pending
	}
}
