// Package fasthttpserve is the gateway's portable transport
// (transport: fasthttp): fasthttp.Server, a goroutine per connection, with
// the reactor's limits on what a connection may make the gateway hold.
// The name keeps it apart from the fasthttp package it serves with.
package fasthttpserve

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/server/transport"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

// fastHTTPTransport serves clients with fasthttp.Server: one goroutine per
// connection, fasthttp's own keep-alive and pipelining. It is the reference
// the reactor is measured against, and bounds memory the same way:
//
//   - fasthttp reads a socket only when its bufio.Reader (ReadBufferSize)
//     needs bytes, so read-ahead is capped at that size;
//   - bodies are read through fasthttp's request stream (StreamRequestBody:
//     at most 8 KiB are read before the handler, into a buffer of that
//     size, whatever the Content-Length claims); up to StreamBodyBytes they
//     are then read whole into a buffer that grows with the bytes that
//     arrive, larger ones are streamed to the handler as the reactor
//     streams them;
//   - a header section ending in a bare LF, for which fasthttp would wait
//     until the header timeout, is refused at once (see fhConn).
type fastHTTPTransport struct {
	srv         *fasthttp.Server
	tlsConf     *tls.Config // nil for cleartext
	h2          transport.ConnServer
	hdrTimeout  time.Duration
	maxConns    int
	relays      sync.Map // client connections being relayed (hijacked)
	conns       atomic.Int64
	h           transport.Handler
	maxBody     int64
	streamBytes int
	hdrLimit    int
	bodies      sync.Pool // *fhBody
	// writeTimeout is renewed per window of a streamed answer (pace).
	writeTimeout time.Duration

	// oversized holds the headers (by address, one per connection) of
	// requests whose Content-Length is over the limit, between
	// HeaderReceived and the answer; noversized counts them so that the
	// common case costs one atomic load.
	oversized  sync.Map
	noversized atomic.Int64
}

// New returns the fasthttp transport: portable, a goroutine per
// connection.
func New(h transport.Handler, o transport.Options) transport.Transport {
	return newFastHTTPTransport(h, o)
}

func newFastHTTPTransport(h transport.Handler, o transport.Options) *fastHTTPTransport {
	t := &fastHTTPTransport{h: h, maxBody: max(o.MaxBodyBytes, 0), streamBytes: o.StreamBodyBytes, tlsConf: o.TLS,
		h2: o.HTTP2, hdrTimeout: o.HeaderTimeout, maxConns: o.MaxConns, writeTimeout: o.WriteTimeout}
	if t.streamBytes <= 0 {
		t.streamBytes = fasthttp.DefaultMaxRequestBodySize
	}
	sized := o
	if sized.MaxHeaderBytes <= 0 {
		sized.MaxHeaderBytes = transport.DefaultHeaderBytes
	}
	if sized.MaxURIBytes <= 0 {
		sized.MaxURIBytes = transport.DefaultURIBytes
	}
	t.hdrLimit = sized.ReadBufferSize()
	t.bodies.New = func() any { return &fhBody{} }
	bodyTimeout := o.BodyTimeout
	t.srv = &fasthttp.Server{
		Handler:      t.serve,
		ErrorHandler: t.serveError,
		HeaderReceived: func(hdr *fasthttp.RequestHeader) fasthttp.RequestConfig {
			cl := hdr.ContentLength()
			if cl > 0 && t.maxBody > 0 && int64(cl) > t.maxBody {
				// Refused (413) from the header alone. fasthttp would
				// first wait for a byte of the body: a deadline already
				// past makes that read fail at once, and the error
				// handler answers 413 for it.
				if _, loaded := t.oversized.LoadOrStore(hdr, struct{}{}); !loaded {
					t.noversized.Add(1)
				}
				return fasthttp.RequestConfig{ReadTimeout: time.Nanosecond, MaxRequestBodySize: 1}
			}
			t.forget(hdr)
			// The header timeout got the headers here; a body gets its own.
			if cl != 0 && bodyTimeout > 0 {
				return fasthttp.RequestConfig{ReadTimeout: bodyTimeout}
			}
			return fasthttp.RequestConfig{}
		},
		ConnState: func(c net.Conn, s fasthttp.ConnState) {
			fc, _ := c.(*fhConn)
			switch s {
			case fasthttp.StateNew:
				t.conns.Add(1)
			case fasthttp.StateIdle:
				if fc != nil {
					fc.nextRequest()
				}
			case fasthttp.StateClosed, fasthttp.StateHijacked:
				if fc != nil {
					fc.ctx = nil
				}
				t.conns.Add(-1)
			}
		},
		ReadBufferSize: o.ReadBufferSize(),
		ReadTimeout:    o.HeaderTimeout,
		IdleTimeout:    o.IdleTimeout,
		WriteTimeout:   o.WriteTimeout,
		Concurrency:    o.MaxConns,
		// Bodies come as a stream: fasthttp reads at most 8 KiB of one
		// before the handler runs, whatever length the client claims
		// (without it, it allocates the claimed length up front). The
		// limit is enforced by HeaderReceived and fhBody.
		StreamRequestBody:            true,
		MaxRequestBodySize:           int(o.MaxBodyBytes),
		DisablePreParseMultipartForm: true,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		CloseOnShutdown:              true,
		Logger:                       discardLogger{},
	}
	return t
}

func (t *fastHTTPTransport) Serve(ln net.Listener) error {
	// Handshakes complete before fasthttp reads: inside its first read
	// the handshake's writes had no deadline. Under TLS the bare-LF check
	// (fhConn) reads the plaintext. On cleartext the listener finds the
	// connections that open with the HTTP/2 preface (h2c), served or
	// refused whether or not an HTTP/2 server is given.
	ln = newALPNListener(ln, t.tlsConf, t.h2, t.h, t.hdrTimeout, t.maxConns, t.Conns)
	return t.srv.Serve(fhListener{Listener: ln, limit: t.hdrLimit})
}

func (t *fastHTTPTransport) Shutdown(ctx context.Context) error {
	h2done := make(chan error, 1)
	if t.h2 != nil {
		go func() { h2done <- t.h2.Shutdown(ctx) }()
	} else {
		h2done <- nil
	}
	err := t.srv.ShutdownWithContext(ctx)
	if h2err := <-h2done; err == nil {
		err = h2err
	}
	// Relays (hijacked connections) are fasthttp's no longer: they end
	// with the transport, whether the drain finished or gave up.
	t.relays.Range(func(k, _ any) bool {
		k.(*relayConn).stop()
		return true
	})
	return err
}

func (t *fastHTTPTransport) Conns() int {
	n := int(t.conns.Load())
	if t.h2 != nil {
		n += t.h2.Conns()
	}
	return n
}

// forget drops a header's oversized mark.
func (t *fastHTTPTransport) forget(hdr *fasthttp.RequestHeader) bool {
	if t.noversized.Load() == 0 {
		return false
	}
	if _, ok := t.oversized.LoadAndDelete(hdr); ok {
		t.noversized.Add(-1)
		return true
	}
	return false
}

// serve is the fasthttp handler: it refuses what the transport refuses,
// reads small bodies whole, and calls the gateway with a context it
// releases once the answer is in fasthttp's hands (fasthttp writes it when
// this returns, from ctx.Response alone).
func (t *fastHTTPTransport) serve(ctx *fasthttp.RequestCtx) {
	req, resp := &ctx.Request, &ctx.Response
	if fc, ok := ctx.Conn().(*fhConn); ok {
		fc.ctx = ctx
	}
	c := pipeline.Acquire(req, resp)
	c.Peer = transport.PeerOf(ctx.RemoteAddr())
	var err error
	switch cl := req.Header.ContentLength(); {
	case t.forget(&req.Header) || cl > 0 && t.maxBody > 0 && int64(cl) > t.maxBody:
		err = codec.ErrBodyTooLarge
	case codec.EndsBadly(&req.Header):
		err = codec.ErrBareLFEnd
	}
	http11 := req.Header.IsHTTP11() // before the handler, which rewrites the request
	var b *fhBody
	if err == nil && req.IsBodyStream() {
		b, err = t.readBody(req)
		if b != nil {
			b.bound.conn = ctx.Conn()
		}
	}
	if err != nil {
		t.h.ServeError(err, c)
		ctx.SetConnectionClose()
	} else if t.h.Serve(c) {
		ctx.SetConnectionClose()
	}
	up := c.Upgrade
	pipeline.Release(c)
	if !http11 && resp.IsBodyStream() && resp.Header.ContentLength() < 0 {
		refuseUnframed(resp)
		ctx.SetConnectionClose()
	}
	t.pace(ctx)
	if up != nil && resp.StatusCode() != fasthttp.StatusSwitchingProtocols {
		_ = up.Conn.Close() // the 101 was replaced on the way out
	} else if up != nil {
		// fasthttp writes the 101, then hands over the connection (with
		// what its reader holds still readable first).
		ctx.Hijack(func(hijacked net.Conn) {
			client := &relayConn{Conn: hijacked}
			t.relays.Store(client, struct{}{})
			transport.Relay(client, up.Conn, nil, up, transport.Spawn, func() {
				client.stop()
				transport.Shutdown(up.Conn)
			})
			t.relays.Delete(client)
			client.end()
			_ = up.Conn.Close()
		})
	}
	if b != nil {
		// The request lets go of the buffer before it goes back.
		req.ResetBody()
		b.release()
		t.bodies.Put(b)
	}
}

// refuseUnframed answers 502 in the gateway's error shape where the answer
// streams without a length and the client speaks HTTP/1.0: fasthttp's
// server writes every such body chunked, which an HTTP/1.0 client cannot
// read, and cannot end one with the connection's close as the netpoll
// transport does. Holding the answer to learn its length is what
// streaming exists to avoid; the backend's connection is closed.
func refuseUnframed(resp *fasthttp.Response) {
	trace := slices.Clone(resp.Header.Peek("X-Request-Id"))
	resp.Reset()
	resp.Header.SetNoDefaultContentType(true)
	resp.SetStatusCode(fasthttp.StatusBadGateway)
	resp.Header.SetContentType("application/json")
	resp.Header.SetBytesV("X-Request-Id", trace)
	resp.AppendBodyString(`{"code":502,"message":"an answer of unknown length cannot be streamed to an HTTP/1.0 client on the fasthttp transport","trace_id":"`)
	resp.AppendBody(trace)
	resp.AppendBodyString(`"}`)
}

// pace renews the write timeout each window of a streamed answer the
// client takes (see transport.Paced): fasthttp's server sets it once, before
// the answer, which would cut a long answer to a client reading steadily.
func (t *fastHTTPTransport) pace(ctx *fasthttp.RequestCtx) {
	if t.writeTimeout <= 0 || !ctx.Response.IsBodyStream() {
		return
	}
	if p, ok := ctx.Response.BodyStream().(transport.Paced); ok {
		conn, d := ctx.Conn(), t.writeTimeout
		p.Pace(func() { _ = conn.SetWriteDeadline(time.Now().Add(d)) })
	}
}

func (t *fastHTTPTransport) serveError(ctx *fasthttp.RequestCtx, err error) {
	if fc, ok := ctx.Conn().(*fhConn); ok {
		fc.ctx = ctx
	}
	if t.forget(&ctx.Request.Header) {
		// The read that failed was the one HeaderReceived cut short.
		err = codec.ErrBodyTooLarge
	}
	c := pipeline.Acquire(&ctx.Request, &ctx.Response)
	c.Peer = transport.PeerOf(ctx.RemoteAddr())
	t.h.ServeError(err, c)
	pipeline.Release(c)
}

// readBody reads a body of up to streamBytes whole from fasthttp's stream,
// into a pooled buffer that grows with the bytes that arrive; a larger one
// stays a stream (a chunked one starting with what was read), with the body
// limit enforced. It returns the buffer to put back after the handler, if
// it took one.
func (t *fastHTTPTransport) readBody(req *fasthttp.Request) (*fhBody, error) {
	cl := req.Header.ContentLength()
	switch {
	case cl == 0:
		req.ResetBody()
		return nil, nil
	}
	b := t.bodies.Get().(*fhBody)
	b.rest, b.limit = req.BodyStream(), t.maxBody
	if cl > t.streamBytes {
		req.SetBodyStream(b, cl) // fasthttp's stream yields exactly cl bytes; b bounds its time
		return b, nil
	}
	want := cl
	if cl < 0 {
		want = t.streamBytes + 1 // chunked: read one byte past the threshold to know
	}
	buf := b.buf[:0]
	for len(buf) < want {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(max(cap(buf), transport.MinBodyBuffer), want-len(buf)))
		}
		n, err := b.read(buf[len(buf):min(cap(buf), want)])
		buf = buf[:len(buf)+n]
		if err == io.EOF && (cl < 0 || len(buf) == want) {
			break
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			b.buf = buf
			b.release()
			t.bodies.Put(b)
			return nil, err
		}
	}
	b.buf = buf
	if len(buf) > t.streamBytes {
		// Chunked and large: the handler streams it, from the start.
		b.pre = buf
		req.SetBodyStream(b, -1)
		return b, nil
	}
	if len(buf) == 0 {
		req.ResetBody()
		req.Header.SetContentLength(0)
	} else {
		req.SetBodyRaw(buf)
	}
	return b, nil
}

// fhBody is a request body taken from fasthttp's request stream: what was
// read before the handler ran, then the rest of the stream, never more than
// the body limit in all. Pooled; the handler reads it only while it runs.
type fhBody struct {
	buf   []byte    // grows with the bytes read
	pre   []byte    // part of buf not yet given to the handler
	rest  io.Reader // fasthttp's stream
	total int64
	limit int64 // 0: none
	err   error
	bound fhBound
}

func (b *fhBody) Read(p []byte) (int, error) {
	if len(b.pre) > 0 {
		n := copy(p, b.pre)
		b.pre = b.pre[n:]
		return n, nil
	}
	return b.read(p)
}

func (b *fhBody) read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.rest.Read(p)
	b.total += int64(n)
	if b.limit > 0 && b.total > b.limit {
		n -= int(b.total - b.limit)
		err = codec.ErrBodyTooLarge
	}
	n, err = b.bound.after(n, err)
	if err != nil {
		b.err = err
	}
	return max(n, 0), err
}

func (b *fhBody) release() {
	b.buf, b.pre = b.buf[:0], nil
	b.rest, b.total, b.limit, b.err = nil, 0, 0, nil
	b.bound = fhBound{}
}

// fhListener wraps each accepted connection in an fhConn.
type fhListener struct {
	net.Listener
	limit int
}

func (l fhListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	fc := &fhConn{Conn: c, limit: l.limit}
	fc.hdr.Start(l.limit)
	return fc, nil
}

// fhConn refuses a header section that ends in a bare LF. fasthttp only
// ends a section at CRLF CRLF and would read on, waiting for one, until the
// header timeout; fhConn follows the header's bytes as it hands them over
// and, when fasthttp asks for more after a section that has ended (with a
// bare LF), fails the read: fasthttp answers that error (400) at once.
//
// All its methods run on the connection's goroutine in fasthttp.Server,
// which also calls the handler, so ctx needs no lock. (It relies on the
// server keeping one RequestCtx per connection, which it does unless
// ReduceMemoryUsage or a TimeoutHandler is used; neither is.)
type fhConn struct {
	net.Conn
	ctx   *fasthttp.RequestCtx // set by the first request's handler
	hdr   codec.HeaderEnd
	limit int
	tail  [3]byte // the last bytes handed over
	ntail int
}

func (c *fhConn) Read(p []byte) (int, error) {
	if c.hdr.Bad() && c.readingHeader() {
		return 0, codec.ErrBareLFEnd
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.hdr.Feed(p[:n])
		if n >= len(c.tail) {
			c.ntail = copy(c.tail[:], p[n-len(c.tail):n])
		} else {
			keep := min(c.ntail, len(c.tail)-n)
			copy(c.tail[:], c.tail[c.ntail-keep:c.ntail])
			c.ntail = keep + copy(c.tail[keep:], p[:n])
		}
	}
	return n, err
}

// readingHeader reports whether fasthttp is reading a request's header (on
// the first request, before any handler ran, fhConn has seen every byte
// from the start and its verdict is exact either way).
func (c *fhConn) readingHeader() bool {
	return c.ctx == nil || len(c.ctx.Request.Header.RawHeaders()) == 0
}

// nextRequest starts watching for the next header section, after a request
// was answered. Bytes of it fasthttp may already hold were not seen here:
// the scan joins the stream where it is.
func (c *fhConn) nextRequest() {
	c.hdr.Resume(c.limit, c.tail[:c.ntail])
}

// discardLogger silences fasthttp's own error lines; the gateway logs every
// answer it makes, errors included, in the access log.
type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}

// relayConn is a hijacked client connection being relayed. fasthttp's
// hijacked connection cannot be closed by its handler (fasthttp closes it
// when the handler returns), so a relay ends it by stopping: reads then
// end, and a read already waiting is cut by a deadline in the past.
type relayConn struct {
	net.Conn
	stopped atomic.Bool

	// ended says the hijack handler returned: fasthttp takes the
	// connection back and clears it, so a Shutdown that found the relay
	// just before must not touch it any more.
	mu    sync.Mutex
	ended bool
}

func (r *relayConn) Read(p []byte) (int, error) {
	if r.stopped.Load() {
		return 0, io.EOF
	}
	return r.Conn.Read(p)
}

func (r *relayConn) Write(p []byte) (int, error) {
	if r.stopped.Load() {
		return 0, net.ErrClosed
	}
	return r.Conn.Write(p)
}

func (r *relayConn) stop() {
	r.stopped.Store(true)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.ended {
		_ = r.Conn.SetDeadline(time.Unix(1, 0))
	}
}

// end is called by the hijack handler as it returns.
func (r *relayConn) end() {
	r.mu.Lock()
	r.ended = true
	r.mu.Unlock()
}
