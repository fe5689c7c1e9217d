package server

import (
	"fmt"
	"runtime"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/edgetls"
	"github.com/tollgate/tollgate/server/fasthttpserve"
	"github.com/tollgate/tollgate/server/h2"
	"github.com/tollgate/tollgate/server/reactor"
	"github.com/tollgate/tollgate/server/transport"
)

// Transport, Handler and Options are the transport contracts (package
// transport), named here for the gateway's callers.
type (
	Transport = transport.Transport
	Handler   = transport.Handler
	Options   = transport.Options
)

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
		Workers:         WorkersFor(f),
		IOUring:         f.IOUring,
	}
}

// defaultProcs is the runtime's own choice of GOMAXPROCS (the cores, or
// the container's CPU limit), taken before ProcsFor changes it.
var defaultProcs = runtime.GOMAXPROCS(0)

// WorkersFor is how many cores a configuration's gateway works on:
// workers, or the runtime's default when it is 0.
func WorkersFor(f *config.File) int {
	if f.Workers > 0 {
		return f.Workers
	}
	return defaultProcs
}

// ProcsFor is the GOMAXPROCS a configuration's gateway runs with. The
// default transport runs one event loop per worker, each in its own epoll
// wait, and one P more for everything else on goroutines: the admin
// listener, health probes, Redis replies to requests that left their loop,
// the access log's writer. Without it such a goroutine waiting for its
// socket was seen only when the runtime's monitor polled, every 10 ms,
// while the loops were busy (bench/RESULTS.md, "Background goroutines
// under load").
func ProcsFor(f *config.File) int {
	if config.IsReactor(f.Transport) {
		return WorkersFor(f) + 1
	}
	return WorkersFor(f)
}

// HTTP2For is the HTTP/2 server of a configuration's TLS listener (t, the
// tls section), with the client limits HTTP/1.1 has and the section's
// http2 ones; nil when h2 is not offered.
func HTTP2For(f *config.File, t *edgetls.Settings) *h2.Server {
	if !t.OffersH2() {
		return nil
	}
	return http2With(f, t.HTTP2)
}

// HTTP2CleartextFor is the HTTP/2 server of a configuration's cleartext
// listener, for clients that open with the HTTP/2 preface (h2c with prior
// knowledge); nil when client.h2c is off. It is a server of its own, with
// the tls section's http2 limits when there is one (t may be nil), so
// both listeners meet a client with the same limits and each reports its
// own figures.
func HTTP2CleartextFor(f *config.File, t *edgetls.Settings) *h2.Server {
	if !f.Client.ServesH2C() {
		return nil
	}
	var l edgetls.HTTP2Limits
	if t != nil {
		l = t.HTTP2
	}
	return http2With(f, l)
}

func http2With(f *config.File, l edgetls.HTTP2Limits) *h2.Server {
	c := f.Client
	header := l.MaxHeaderListBytes
	if header == 0 {
		header = c.MaxHeaderBytes
	}
	return h2.New(h2.Options{
		MaxConcurrentStreams: l.MaxConcurrentStreams,
		MaxHeaderListBytes:   header,
		StreamWindow:         l.StreamWindowBytes,
		ConnWindow:           l.ConnWindowBytes,
		MaxEarlyResets:       l.MaxEarlyResets,
		MaxBodyBytes:         c.MaxBodyBytes,
		StreamBodyBytes:      c.StreamBodyBytes,
		IdleTimeout:          c.IdleTimeout.D(),
		BodyTimeout:          c.BodyTimeout.D(),
		WriteTimeout:         c.WriteTimeout.D(),
	})
}

// NewTransport returns the transport named kind: "reactor" (the epoll
// event loops running requests; "netpoll" is a synonym) or "fasthttp"
// (fasthttp.Server, a goroutine per connection).
func NewTransport(kind string, h Handler, o Options) (Transport, error) {
	switch {
	case kind == config.TransportFastHTTP:
		return fasthttpserve.New(h, o), nil
	case config.IsReactor(kind):
		return reactor.New(h, o)
	}
	return nil, fmt.Errorf("unknown transport %q (want reactor or fasthttp)", kind)
}
