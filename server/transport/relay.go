package transport

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/pipeline"
)

// Endpoint is one side of a relay.
type Endpoint interface {
	io.Reader
	io.Writer
	SetReadDeadline(time.Time) error
}

// relayBuffer is the size of each direction's copy buffer.
const relayBuffer = 16 << 10

// Relay copies bytes both ways between a client and the backend after a
// protocol switch, until a side ends, neither side sent anything for
// up.Idle, or both directions together carried up.MaxBytes. The client's
// bytes read ahead with its request (early) go to the backend first, and
// the backend's read past its 101 (up.Buffered) to the client first.
// spawn runs a function beside the caller and returns the wait for it (a
// goroutine, or a fiber of the caller's event loop); shut must make every
// pending read of both sides return. It reports the bytes carried.
func Relay(client, backend Endpoint, early []byte, up *pipeline.Upgrade, spawn func(func()) (wait func()), shut func()) int64 {
	var total atomic.Int64
	var last atomic.Int64 // unix ns of the last byte read, either way
	last.Store(time.Now().UnixNano())
	var once sync.Once
	stop := func() { once.Do(shut) }
	copyDir := func(dst io.Writer, src Endpoint, first []byte) {
		defer stop()
		if len(first) > 0 {
			if _, err := dst.Write(first); err != nil {
				return
			}
			total.Add(int64(len(first)))
		}
		buf := make([]byte, relayBuffer)
		for {
			if up.MaxBytes > 0 && total.Load() >= up.MaxBytes {
				return
			}
			_ = src.SetReadDeadline(time.Unix(0, last.Load()).Add(up.Idle))
			n, err := src.Read(buf)
			if n > 0 {
				last.Store(time.Now().UnixNano())
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
				total.Add(int64(n))
			}
			if err != nil {
				// Silent this way, but the other way carried bytes
				// within the idle time: wait on.
				if isTimeout(err) && time.Since(time.Unix(0, last.Load())) < up.Idle {
					continue
				}
				return
			}
		}
	}
	wait := spawn(func() { copyDir(client, backend, up.Buffered) })
	copyDir(backend, client, early)
	wait()
	return total.Load()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// Spawn runs fn on a goroutine; the returned wait blocks until it is done.
func Spawn(fn func()) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	return func() { <-done }
}

// Shutdown ends a connection's pending reads and writes without closing
// it (the socket is closed once the relay is over).
func Shutdown(c net.Conn) {
	switch s := c.(type) {
	case interface{ Shutdown() }:
		s.Shutdown()
	case *net.TCPConn:
		_ = s.CloseRead()
		_ = s.CloseWrite()
	default:
		_ = c.Close()
	}
}
