package server

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/valyala/fasthttp"
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
// Peek finds any spelling the client used).
type Handler interface {
	// Serve answers a parsed request; it reports whether to close.
	Serve(req *fasthttp.Request, resp *fasthttp.Response, peer netip.AddrPort) (closeConn bool)
	// ServeError answers a request that could not be read.
	ServeError(err error, req *fasthttp.Request, resp *fasthttp.Response, peer netip.AddrPort)
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
	Workers         int           // cores the gateway uses (GOMAXPROCS), 0 for all; the reactor runs one epoll loop per 20
}

// OptionsFor takes the transport settings from a configuration.
func OptionsFor(f *config.File) Options {
	c := f.Client
	return Options{
		MaxHeaderBytes:  c.MaxHeaderBytes,
		MaxURIBytes:     c.MaxURIBytes,
		MaxBodyBytes:    c.MaxBodyBytes,
		StreamBodyBytes: c.StreamBodyBytes,
		HeaderTimeout:   c.HeaderTimeout.D(),
		BodyTimeout:     c.BodyTimeout.D(),
		IdleTimeout:     c.IdleTimeout.D(),
		WriteTimeout:    c.WriteTimeout.D(),
		MaxConns:        c.MaxConns,
		Workers:         f.Workers,
	}
}

// readBufferSize is the largest request line + header section a transport
// reads before answering 431. The request line has its own limit (414), so
// the buffer holds both plus the blank line.
func (o *Options) readBufferSize() int { return o.MaxHeaderBytes + o.MaxURIBytes + 64 }

// NewTransport returns the transport named kind ("netpoll" or "fasthttp").
func NewTransport(kind string, h Handler, o Options) (Transport, error) {
	switch kind {
	case "fasthttp":
		return newFastHTTPTransport(h, o), nil
	case "netpoll":
		return newNetpollTransport(h, o)
	}
	return nil, fmt.Errorf("unknown transport %q (want netpoll or fasthttp)", kind)
}

// peerOf converts a connection's remote address without allocating.
func peerOf(a net.Addr) netip.AddrPort {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.AddrPort()
	}
	return netip.AddrPort{}
}
