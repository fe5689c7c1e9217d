package upstream

import (
	"errors"
	"net"
	"syscall"
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
// The loop's own pool closes such connections without this (its
// connections report it: Stale).
type guardedConn struct {
	net.Conn
	rc      syscall.RawConn
	peekFn  func(fd uintptr) bool // peek, bound once
	pending bool                  // what peek found
}

// guard wraps c when its socket can be looked at.
func guard(c net.Conn) net.Conn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	g := &guardedConn{Conn: c, rc: rc}
	g.peekFn = g.peek
	return g
}

func (g *guardedConn) Write(p []byte) (int, error) {
	g.pending = false
	if err := g.rc.Read(g.peekFn); err == nil && g.pending {
		return 0, errUnsolicited
	}
	return g.Conn.Write(p)
}

func (g *guardedConn) peek(fd uintptr) bool {
	g.pending = inputPending(fd)
	return true // never wait
}
