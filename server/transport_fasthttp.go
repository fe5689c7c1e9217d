package server

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/valyala/fasthttp"
)

// fastHTTPTransport serves clients with fasthttp.Server: one goroutine per
// connection, fasthttp's own keep-alive and pipelining. It is the reference
// the netpoll reactor is measured against. Unlike the reactor it buffers
// request bodies whole (up to MaxBodyBytes) instead of streaming large ones.
type fastHTTPTransport struct {
	srv   *fasthttp.Server
	conns atomic.Int64
}

func newFastHTTPTransport(h Handler, o Options) *fastHTTPTransport {
	t := &fastHTTPTransport{}
	bodyTimeout := o.BodyTimeout
	t.srv = &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			if h.Serve(&ctx.Request, &ctx.Response, peerOf(ctx.RemoteAddr())) {
				ctx.SetConnectionClose()
			}
		},
		ErrorHandler: func(ctx *fasthttp.RequestCtx, err error) {
			h.ServeError(err, &ctx.Request, &ctx.Response, peerOf(ctx.RemoteAddr()))
		},
		HeaderReceived: func(hdr *fasthttp.RequestHeader) fasthttp.RequestConfig {
			// The header timeout got the headers here; a body gets its own.
			if hdr.ContentLength() != 0 && bodyTimeout > 0 {
				return fasthttp.RequestConfig{ReadTimeout: bodyTimeout}
			}
			return fasthttp.RequestConfig{}
		},
		ConnState: func(_ net.Conn, s fasthttp.ConnState) {
			switch s {
			case fasthttp.StateNew:
				t.conns.Add(1)
			case fasthttp.StateClosed, fasthttp.StateHijacked:
				t.conns.Add(-1)
			}
		},
		ReadBufferSize: o.readBufferSize(),
		ReadTimeout:    o.HeaderTimeout,
		IdleTimeout:    o.IdleTimeout,
		WriteTimeout:   o.WriteTimeout,
		Concurrency:    o.MaxConns,
		// fasthttp can only stream every body (it pre-reads up to the
		// limit and waits for those bytes even when the declared length
		// is already too large) or none; this reference transport buffers
		// bodies whole up to the limit, which also makes it refuse an
		// oversized Content-Length before reading a byte of it.
		MaxRequestBodySize:           int(o.MaxBodyBytes),
		DisablePreParseMultipartForm: true,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		CloseOnShutdown:              true,
		Logger:                       discardLogger{},
	}
	return t
}

func (t *fastHTTPTransport) Serve(ln net.Listener) error { return t.srv.Serve(ln) }

func (t *fastHTTPTransport) Shutdown(ctx context.Context) error {
	return t.srv.ShutdownWithContext(ctx)
}

func (t *fastHTTPTransport) Conns() int { return int(t.conns.Load()) }

// discardLogger silences fasthttp's own error lines; the gateway logs every
// answer it makes, errors included, in the access log.
type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}
