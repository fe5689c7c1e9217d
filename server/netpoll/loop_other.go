//go:build !linux

package netpoll

import "errors"

// npLoop is the epoll reactor's loop; it exists on Linux only.
type npLoop struct{}

func newNpLoop() (*npLoop, error) {
	return nil, errors.New("the netpoll transport needs Linux (epoll); use fasthttp")
}

func (*npLoop) run()                {}
func (*npLoop) stop()               {}
func (*npLoop) add(*npConn) error   { return errors.ErrUnsupported }
func (*npLoop) rearm(*npConn) error { return errors.ErrUnsupported }
func (*npLoop) remove(*npConn)      {}
