package server

import (
	"fmt"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/server/h2"
	"github.com/tollgate/tollgate/server/netpoll"
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
		Workers:         f.Workers,
	}
}

// HTTP2For is the HTTP/2 server of a configuration's TLS listener, with
// the client limits HTTP/1.1 has and the tls block's http2 ones; nil when
// h2 is not offered.
func HTTP2For(f *config.File) *h2.Server {
	if !f.TLS.OffersH2() {
		return nil
	}
	c, l := f.Client, f.TLS.HTTP2
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

// NewTransport returns the transport named kind: "netpoll" (the epoll
// reactor running requests on its event loops), "netpoll-dispatch" (the
// same reactor handing each ready connection to a goroutine) or
// "fasthttp" (fasthttp.Server, a goroutine per connection).
func NewTransport(kind string, h Handler, o Options) (Transport, error) {
	switch kind {
	case "fasthttp":
		return newFastHTTPTransport(h, o), nil
	case "netpoll":
		o.EventLoop = true
		return netpoll.New(h, o)
	case "netpoll-dispatch":
		o.EventLoop = false
		return netpoll.New(h, o)
	}
	return nil, fmt.Errorf("unknown transport %q (want netpoll, netpoll-dispatch or fasthttp)", kind)
}
