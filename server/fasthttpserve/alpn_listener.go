package fasthttpserve

import (
	"crypto/tls"
	"net"
	"sync"
	"time"

	"github.com/tollgate/tollgate/server/transport"
)

// alpnListener is the fasthttp transport's listener: it completes each
// TLS handshake (its reads and writes under the header timeout) before
// fasthttp sees the connection, hands a client that chose h2 to the
// HTTP/2 server (when one is offered), and lets fasthttp accept the others
// as HTTP/1.1. On cleartext (conf nil) it reads a connection's first bytes
// instead, for the HTTP/2 preface (h2c_listener.go).
type alpnListener struct {
	net.Listener
	conf    *tls.Config
	h2      transport.ConnServer
	h       transport.Handler
	timeout time.Duration
	// shaking bounds the handshakes in progress; an h2 connection is
	// refused once open() — every client connection, h2 and HTTP/1.1 —
	// reaches max (fasthttp's own limit counts only what it serves).
	shaking chan struct{}
	open    func() int
	max     int

	start sync.Once
	ready chan net.Conn
	done  chan struct{} // closed when the listener failed or closed
	err   error         // why; set before done closes
}

func newALPNListener(ln net.Listener, conf *tls.Config, h2 transport.ConnServer, h transport.Handler, timeout time.Duration,
	maxConns int, open func() int) *alpnListener {
	if maxConns <= 0 {
		maxConns = 1 << 20
	}
	return &alpnListener{Listener: ln, conf: conf, h2: h2, h: h, timeout: timeout,
		shaking: make(chan struct{}, maxConns), open: open, max: maxConns,
		ready: make(chan net.Conn), done: make(chan struct{})}
}

func (l *alpnListener) Accept() (net.Conn, error) {
	l.start.Do(func() { go l.acceptLoop() })
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		return nil, l.err
	}
}

func (l *alpnListener) acceptLoop() {
	for {
		raw, err := l.Listener.Accept()
		if err != nil {
			l.err = err
			close(l.done)
			return
		}
		select {
		case l.shaking <- struct{}{}:
			go l.handshake(raw)
		default: // as many handshakes as connections allowed: refuse
			_ = raw.Close()
		}
	}
}

func (l *alpnListener) handshake(raw net.Conn) {
	if l.conf == nil {
		l.sniff(raw)
		return
	}
	c := tls.Server(raw, l.conf)
	shaken := func() { <-l.shaking }
	if l.timeout > 0 {
		_ = raw.SetDeadline(time.Now().Add(l.timeout))
	}
	if err := c.Handshake(); err != nil {
		shaken()
		_ = raw.Close()
		return
	}
	shaken()
	_ = raw.SetDeadline(time.Time{})
	if c.ConnectionState().NegotiatedProtocol == "h2" {
		if l.h2 == nil || l.open() >= l.max {
			_ = raw.Close()
			return
		}
		l.h2.ServeConn(c, transport.PeerOf(raw.RemoteAddr()), l.h)
		return
	}
	l.pass(c)
}

// pass gives fasthttp a connection to serve as HTTP/1.x.
func (l *alpnListener) pass(c net.Conn) {
	select {
	case l.ready <- c:
	case <-l.done:
		_ = c.Close()
	}
}
