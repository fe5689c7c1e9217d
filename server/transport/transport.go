// Package transport is what every transport shares: the Transport and
// Handler contracts between a transport and the gateway, and the settings a
// transport takes at start.
package transport

import (
	"context"
	"crypto/tls"
	"net"
	"net/netip"
	"time"

	"github.com/tollgate/tollgate/pipeline"
)

// Transport accepts client connections, parses HTTP/1.x requests from them
// and writes the answers. It owns keep-alive, pipelining and the client
// limits that act while bytes are read; everything after parsing belongs to
// the Handler.
type Transport interface {
	// Serve accepts connections on ln until Shutdown; it returns nil after
	// a Shutdown and the accept error otherwise.
	Serve(ln net.Listener) error
	// Shutdown stops accepting, closes idle connections, lets in-flight
	// requests finish and closes their connections after the answer. It
	// returns ctx's error if they do not finish in time.
	Shutdown(ctx context.Context) error
	// Conns reports open client connections.
	Conns() int
}

// Handler is what a transport calls for each request. The request is parsed
// from the wire with its raw header bytes kept (strict checks and the
// internal-header strip read them) and with field names normalized (so
// Peek finds any spelling the client used). The transport owns
// the request's context for its whole life: it takes one (pipeline.Acquire
// or one it keeps, NewOwned) holding the parsed request (c.Req, the body
// whole or the start of its stream), an empty c.Resp and the client's
// c.Peer; on an event loop also c.Loop, and c.Answer, the buffer it lends
// for an upstream's answer kept as read. The handler answers in c.Resp (or
// c.Answer) and leaves a protocol switch in c.Upgrade; the transport then
// writes the answer, takes the switch, and releases c (pipeline.Release).
type Handler interface {
	// Serve answers a parsed request; it reports whether to close.
	Serve(c *pipeline.Ctx) (closeConn bool)
	// ServeError answers a request that could not be read.
	ServeError(err error, c *pipeline.Ctx)
}

// Options are the transport settings, fixed for the life of the process
// (a reload cannot change them; a restart can).
type Options struct {
	MaxHeaderBytes  int           // header section limit (431)
	MaxURIBytes     int           // request-target limit (414)
	MaxBodyBytes    int64         // body limit (413) enforced while reading
	StreamBodyBytes int           // Content-Length bodies above this are streamed
	HeaderTimeout   time.Duration // first byte to end of headers
	BodyTimeout     time.Duration // end of headers to end of body
	IdleTimeout     time.Duration // keep-alive wait between requests
	WriteTimeout    time.Duration // writing one answer
	MaxConns        int           // open client connections
	Workers         int           // cores the gateway works on (server.WorkersFor), 0 for GOMAXPROCS; the reactor runs one epoll loop each
	// IOUring is how the event loops make their socket calls: "auto" (in
	// batches through an io_uring when the kernel allows one, else one
	// syscall each; also ""), "on" (through an io_uring, or the transport
	// does not start) or "off" (one syscall each).
	IOUring string
	// TLS, when set, makes every connection TLS, served with this config.
	TLS *tls.Config
	// HTTP2 serves the TLS connections whose client chose h2 by ALPN or,
	// on a cleartext listener (TLS nil), the connections that open with
	// the HTTP/2 client preface (h2c with prior knowledge); nil when h2 is
	// not offered. Without it a cleartext connection opening with the
	// preface is refused with a GOAWAY (RefuseH2C).
	HTTP2 ConnServer
}

// ConnServer serves whole connections of a protocol other than HTTP/1.x
// (HTTP/2, package h2) with the transport's Handler, so both protocols run
// one pipeline. A transport hands it a connection once its TLS handshake
// chose that protocol, and shuts it down with itself.
type ConnServer interface {
	// ServeConn serves c until it ends; it closes c.
	ServeConn(c net.Conn, peer netip.AddrPort, h Handler)
	// Shutdown asks every connection to finish (GOAWAY), waits for them
	// until ctx ends, then closes what is left.
	Shutdown(ctx context.Context) error
	// Conns reports the connections being served.
	Conns() int
}

// ReadBufferSize is the largest request line + header section a transport
// reads before answering 431. The request line has its own limit (414), so
// the buffer holds both plus the blank line.
func (o *Options) ReadBufferSize() int { return o.MaxHeaderBytes + o.MaxURIBytes + 64 }

// PeerOf converts a connection's remote address without allocating.
func PeerOf(a net.Addr) netip.AddrPort {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.AddrPort()
	}
	return netip.AddrPort{}
}

// Defaults every transport applies to unset Options, and the first size of
// a body buffer (it doubles as bytes arrive, never ahead of them).
const (
	DefaultHeaderBytes = 8192 // Options.MaxHeaderBytes when unset
	DefaultURIBytes    = 4096 // Options.MaxURIBytes when unset
	MinBodyBuffer      = 4096
)
