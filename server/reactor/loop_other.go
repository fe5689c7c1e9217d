//go:build !linux

package reactor

import (
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/internal/sockpeek"
	"github.com/tollgate/tollgate/pipeline"
)

// npLoop is the epoll reactor's loop; it exists on Linux only.
type npLoop struct {
	id     int
	ev     *evState
	single bool
	live   atomic.Int32
}

// loopListener is a listener the loops accept from (Linux only).
type loopListener struct{ done chan struct{} }

func (*netpollTransport) listenOnLoops(net.Listener) (*loopListener, bool) { return nil, false }
func (*loopListener) stop()                                                {}
func (*loopListener) shrinkBacklog()                                       {}

// evState, evPost and fiber are the event-loop mode's (Linux only).
type (
	evState struct{ clock int64 }
	evPost  struct{ c *npConn }
	fiber   struct{}
)

func newNpLoop(*netpollTransport, int) (*npLoop, error) {
	return nil, errors.New("the netpoll transport needs Linux (epoll); use fasthttp")
}

func (*netpollTransport) setRings([]*npLoop) error { return nil }
func (*netpollTransport) checkRing() error         { return nil }

func (*npLoop) run()                        {}
func (*npLoop) stop()                       {}
func (*npLoop) add(*npConn) error           { return errors.ErrUnsupported }
func (*npLoop) rearm(*npConn) error         { return errors.ErrUnsupported }
func (*npLoop) remove(*npConn)              {}
func (*npLoop) forget(*npConn)              {}
func (*evState) post(evPost)                {}
func (*npConn) evRead([]byte) (int, error)  { return 0, errors.ErrUnsupported }
func (*npConn) evWrite([]byte) (int, error) { return 0, errors.ErrUnsupported }
func (*npConn) evLinger()                   {}
func (*npConn) netConn() error              { return nil }
func (c *npConn) localAddr() net.Addr       { return &net.TCPAddr{} }

func (*fiber) Sleep(*pipeline.Ctx, time.Duration)                {}
func (*fiber) Block(_ *pipeline.Ctx, call pipeline.BlockingCall) { call.Run() }
func (*fiber) ID() int                                           { return 0 }
func (*fiber) Dial(string, time.Duration) (net.Conn, error)      { return nil, errors.ErrUnsupported }

func (*fiber) Park(*pipeline.ParkQueue, time.Duration) bool { return false }
func (*fiber) Now() time.Time                               { return time.Now() }

func (*fiber) spawn(fn func()) func() { fn(); return func() {} }
func (*fiber) ownWork() *npWork       { return nil }

func sysClose(fd int32) error             { return syscall.Close(int(fd)) }
func sysShutdown(fd int32, how int) error { return syscall.Shutdown(int(fd), how) }

func sysPeek(fd int32) int {
	n, _ := sockpeek.Byte(uintptr(fd))
	return n
}

const ringEntries = 0 // no rings off Linux
