package upstream

import (
	"crypto/tls"
	"errors"
	"net"
	"time"

	"github.com/tollgate/tollgate/pipeline"
)

// TLS to a gRPC backend on the loop. The session is crypto/tls over the
// loop's socket, read by one call at a time and written by one at a time
// (grpcloop.go), whose reads and writes park their fiber as any socket's
// do. What must never happen is a fiber waiting on the session's locks,
// held by a fiber parked inside it: the loop's thread would wait for a
// fiber only it can run. Reading can write (an alert, the answer to a
// key update), under the session's write lock, so the bytes the reader
// takes from the socket are handed to the session only while no writer
// is inside it, and a write the reader makes holds the writers off until
// it is done (as the h2 server's TLS does: server/reactor/tls.go).

// grpcLoopTLS is a connection's TLS state; the zero value is no TLS.
type grpcLoopTLS struct {
	on      bool
	out     bool               // a fiber is inside a write to the session
	waiters pipeline.ParkQueue // fibers waiting for out to clear
	reader  pipeline.Loop      // the reading call's fiber, for its waits
}

// madeWith reports whether the connection was made with t (nil: h2c): a
// connection is reused only by calls of the same TLS configuration.
func (cc *grpcLoopConn) madeWith(t *GRPCTLS) bool {
	if t == nil {
		return !cc.tls.on
	}
	return cc.tls.on && cc.tlsKey == t.Key
}

// handshake makes the connection a TLS session that agreed on h2.
func (cc *grpcLoopConn) handshake(loop pipeline.Loop, t *GRPCTLS) error {
	cfg := t.Config.Clone()
	cfg.NextProtos = []string{"h2"}
	if cfg.ServerName == "" {
		// As grpc-go names the server: the address's host.
		if host, _, err := net.SplitHostPort(cc.in.Addr); err == nil {
			cfg.ServerName = host
		}
	}
	cc.tls.on, cc.tlsKey = true, t.Key
	session := tls.Client(grpcTLSSocket{cc}, cfg)
	_ = cc.raw.SetDeadline(loop.Now().Add(cc.in.pool.Connect))
	if err := session.Handshake(); err != nil {
		return err
	}
	_ = cc.raw.SetDeadline(time.Time{})
	if session.ConnectionState().NegotiatedProtocol != "h2" {
		return errNoH2OverTLS
	}
	cc.conn = session
	return nil
}

var errNoH2OverTLS = errors.New("grpc: the backend did not agree to HTTP/2 over TLS (ALPN h2)")

// writeSession writes p through the session, waiting for a write the
// reader makes inside it to end first.
func (cc *grpcLoopConn) writeSession(loop pipeline.Loop, p []byte) error {
	if !cc.tls.on {
		_, err := cc.conn.Write(p)
		return err
	}
	for cc.tls.out && cc.err == nil {
		loop.Park(&cc.tls.waiters, time.Hour)
	}
	if cc.err != nil {
		return cc.err
	}
	cc.tls.out = true
	_, err := cc.conn.Write(p)
	cc.tls.out = false
	cc.tls.waiters.WakeOne()
	return err
}

// grpcTLSSocket is the socket under a connection's TLS session.
type grpcTLSSocket struct{ cc *grpcLoopConn }

func (s grpcTLSSocket) Read(p []byte) (int, error) {
	cc := s.cc
	n, err := cc.raw.Read(p)
	// The session may write while it takes these bytes: not while a
	// writer is inside it.
	for cc.tls.out && cc.tls.reader != nil && cc.err == nil {
		cc.tls.reader.Park(&cc.tls.waiters, time.Hour)
	}
	return n, err
}

func (s grpcTLSSocket) Write(p []byte) (int, error) {
	cc := s.cc
	if cc.tls.out {
		return cc.raw.Write(p) // the writer's own write
	}
	// The session writes while reading (an alert, a key update, or the
	// handshake): the writers wait meanwhile.
	cc.tls.out = true
	n, err := cc.raw.Write(p)
	cc.tls.out = false
	cc.tls.waiters.WakeOne()
	return n, err
}

func (s grpcTLSSocket) Close() error                       { return s.cc.raw.Close() }
func (s grpcTLSSocket) LocalAddr() net.Addr                { return s.cc.raw.LocalAddr() }
func (s grpcTLSSocket) RemoteAddr() net.Addr               { return s.cc.raw.RemoteAddr() }
func (s grpcTLSSocket) SetDeadline(t time.Time) error      { return s.cc.raw.SetDeadline(t) }
func (s grpcTLSSocket) SetReadDeadline(t time.Time) error  { return s.cc.raw.SetReadDeadline(t) }
func (s grpcTLSSocket) SetWriteDeadline(t time.Time) error { return s.cc.raw.SetWriteDeadline(t) }
