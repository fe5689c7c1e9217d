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

// epollLoop is the epoll reactor's loop; it exists on Linux only.
type epollLoop struct {
	id     int
	ev     *evState
	single bool
	live   atomic.Int32
}

// loopListener is a listener the loops accept from (Linux only).
type loopListener struct{ done chan struct{} }

func (*reactorTransport) listenOnLoops(net.Listener) (*loopListener, bool) { return nil, false }
func (*loopListener) stop()                                                {}
func (*loopListener) shrinkBacklog()                                       {}

// evState, evPost and fiber are the event-loop mode's (Linux only).
type (
	evState struct{ clock int64 }
	evPost  struct{ c *clientConn }
	fiber   struct{}
)

func newEpollLoop(*reactorTransport, int) (*epollLoop, error) {
	return nil, errors.New("the netpoll transport needs Linux (epoll); use fasthttp")
}

func (*reactorTransport) setRings([]*epollLoop) error { return nil }
func (*reactorTransport) checkRing() error            { return nil }

func (*epollLoop) run()                         {}
func (*epollLoop) stop()                        {}
func (*epollLoop) add(*clientConn) error        { return errors.ErrUnsupported }
func (*epollLoop) rearm(*clientConn) error      { return errors.ErrUnsupported }
func (*epollLoop) remove(*clientConn)           {}
func (*epollLoop) forget(*clientConn)           {}
func (*evState) post(evPost)                    {}
func (*clientConn) evRead([]byte) (int, error)  { return 0, errors.ErrUnsupported }
func (*clientConn) evWrite([]byte) (int, error) { return 0, errors.ErrUnsupported }
func (*clientConn) evLinger()                   {}
func (*clientConn) netConn() error              { return nil }
func (c *clientConn) localAddr() net.Addr       { return &net.TCPAddr{} }

func (*fiber) Sleep(*pipeline.Ctx, time.Duration)                {}
func (*fiber) Block(_ *pipeline.Ctx, call pipeline.BlockingCall) { call.Run() }
func (*fiber) ID() int                                           { return 0 }
func (*fiber) Dial(string, time.Duration) (net.Conn, error)      { return nil, errors.ErrUnsupported }

func (*fiber) Park(*pipeline.ParkQueue, time.Duration) bool { return false }
func (*fiber) Now() time.Time                               { return time.Now() }

func (*fiber) spawn(fn func()) func() { fn(); return func() {} }
func (*fiber) ownWork() *serveState   { return nil }

func sysClose(fd int32) error             { return syscall.Close(int(fd)) }
func sysShutdown(fd int32, how int) error { return syscall.Shutdown(int(fd), how) }

func sysPeek(fd int32) int {
	n, _ := sockpeek.Byte(uintptr(fd))
	return n
}

const ringEntries = 0 // no rings off Linux
