//go:build linux

package reactor

import (
	"bufio"
	"errors"
	"io"
	"slices"

	"github.com/tollgate/tollgate/server/transport"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

// serve answers every request the connection's input holds, then hands the
// connection back to its loop, or closes it. It runs on its own goroutine,
// started by dispatch.
func (c *clientConn) serve() {
	t := c.t
	finished := false
	defer func() {
		if !finished { // the handler panicked: keep the books right
			c.close()
			t.served(c, -1)
		}
	}()
	c.linger = false
	// A fiber keeps its buffers between connections.
	w := c.fiber.ownWork()
	w.br.Reset(c)
	w.bw.Reset(c)
	c.bw = w.bw
	keep := t.serveInput(c, w)
	c.bw = nil
	w.br.Reset(nil)
	w.bw.Reset(nil)

	if c.detached {
		// The HTTP/2 server has it now (h2.go), and closes it.
		finished = true
		return
	}
	if keep {
		// From here another goroutine may serve the connection.
		c.idle()
	} else {
		c.finish()
	}
	finished = true
	t.served(c, -1)
}

// serveInput answers requests until the input the reader holds is drained.
// It reports whether the connection stays open.
func (t *reactorTransport) serveInput(c *clientConn, w *serveState) bool {
	for {
		if !t.serveOne(c, w) {
			return false
		}
		// The reader (or TLS) may already hold the next pipelined
		// request; what is still in the socket wakes the loop again.
		if w.br.Buffered() > 0 || c.tlsPending() {
			continue
		}
		return c.flushOut() == nil
	}
}

// serveOne reads, serves and writes one request. It reports whether the
// connection stays open; when it returns false the caller closes it.
func (t *reactorTransport) serveOne(c *clientConn, w *serveState) bool {
	req, resp := &w.req, &w.resp
	resp.Header.SetNoDefaultContentType(true)
	w.answer.Reset() // whatever an earlier request left, it is not this one's

	if c.tls != nil && t.o.HTTP2 != nil && !c.used.Load() && !c.tls.ConnectionState().HandshakeComplete {
		switch h2, err := t.handshakeForH2(c); {
		case err != nil:
			return t.drop(c, w)
		case h2 && t.h2 != nil:
			return t.serveH2(c, w)
		case h2:
			if t.handOffH2(c, nil) != nil {
				return t.drop(c, w)
			}
			return false
		}
	}
	c.readPhase(t.o.HeaderTimeout)
	if c.tls == nil && !c.used.Load() && prefaced(w.br) {
		return t.serveH2C(c, w)
	}
	// The header scanner sees the section from its first byte: what the
	// reader holds already, then what each read brings.
	c.hdr.Start(t.readBufSize)
	if n := w.br.Buffered(); n > 0 {
		b, _ := w.br.Peek(n)
		c.hdr.Feed(b)
	}
	c.inHeader = true
	err := req.Header.Read(w.br)
	c.inHeader = false
	if err != nil {
		return t.fail(c, w, err)
	}
	if c.hdr.Bad() {
		// Parsed only because a CRLF CRLF followed later in the input;
		// refused all the same, so the answer never depends on how the
		// client's bytes were split.
		return t.fail(c, w, codec.ErrBareLFEnd)
	}
	c.used.Store(true)

	streamed, ok := t.readBody(c, w)
	if !ok {
		return false
	}

	// Taken before the handler, which may rewrite the request's headers.
	closeConn := req.Header.ConnectionClose()
	isHTTP11 := req.Header.IsHTTP11()
	isHead := req.Header.IsHead()

	if streamed && c.pending {
		// The handler reads the stream, perhaps while the answer is being
		// written; answers still held for earlier requests go out first.
		if err := c.flushOut(); err != nil {
			return t.drop(c, w)
		}
	}

	if t.serveRequest(c, w) {
		closeConn = true
	}
	if up := w.ctx.Upgrade; up != nil { // a 101, with the backend's connection
		w.ctx.Upgrade = nil
		if !streamed {
			return t.switchProtocols(c, w, up)
		}
		_ = up.Conn.Close() // a handshake has no body to stream
	}
	if streamed {
		// What the handler left of the body is read and dropped, so that
		// the next request starts where this body ends; too much left, or
		// a broken body, and the connection closes instead.
		if closeConn || c.rerr != nil || !c.body.Discard(maxBodyDrain) {
			// Closing with the body unread: the client may still be
			// sending it.
			closeConn, c.linger = true, true
		}
		c.body = codec.Body{}
	}
	closeConn = closeConn || resp.Header.ConnectionClose() || c.rerr != nil || t.shut.Load()

	closeConn, err = t.writeAnswer(c, w, closeConn, isHTTP11, isHead)
	pipeline.Release(w.ctx)
	req.Reset()
	resp.Reset() // closes a streamed body: its backend connection goes back or closes
	if err != nil {
		return false
	}
	if closeConn {
		_ = c.flushOut()
		return false
	}
	c.pending = true
	return true
}

// serveRequest hands a parsed request to the handler, to run on the
// fiber's loop, with the buffer for an upstream's answer kept as read
// (writeAnswer writes it). The context is released once the answer is
// written.
func (t *reactorTransport) serveRequest(c *clientConn, w *serveState) (closeConn bool) {
	x := t.context(c, w)
	x.Loop = c.fiber
	x.Answer = &w.answer
	return t.h.Serve(x)
}

// context readies the context w keeps for a request of c.
func (t *reactorTransport) context(c *clientConn, w *serveState) *pipeline.Ctx {
	x := w.ctx
	if x.Req != nil {
		// Not released: a handler panicked (serve closed the connection).
		pipeline.Release(x)
	}
	x.Req, x.Resp, x.Peer = &w.req, &w.resp, c.peer
	return x
}

// readBody reads the request body, whole up to streamBytes, or sets up a
// stream over the rest of a larger one. It reports whether the body is
// streamed, and ok=false after it has answered an error (the connection
// then closes).
func (t *reactorTransport) readBody(c *clientConn, w *serveState) (streamed, ok bool) {
	req := &w.req
	cl := req.Header.ContentLength()
	switch {
	case cl == 0:
		return false, true
	case cl == -2:
		// No Content-Length and no Transfer-Encoding: a request has no body.
		// ContinueReadBody only adjusts the header here, as fasthttp.Server does.
		_ = req.ContinueReadBody(w.br, 0, false)
		return false, true
	case cl > 0 && t.maxBody > 0 && int64(cl) > t.maxBody:
		// Refused before a byte of it is read, and before 100 Continue.
		return false, t.fail(c, w, codec.ErrBodyTooLarge)
	}

	if t.o.BodyTimeout > 0 {
		c.readPhase(t.o.BodyTimeout)
	}
	if req.MayContinue() {
		c.armWrite()
		_, _ = w.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
		if err := c.flushOut(); err != nil {
			return false, t.drop(c, w)
		}
	}

	if cl > 0 {
		if cl <= t.streamBytes {
			// Read whole, into a buffer that grows with the bytes that
			// arrive: a client claiming a large body and sending little of
			// it costs little.
			pre, err := readFixedBody(w.br, w.pre[:0], cl)
			w.pre = pre
			if err != nil {
				return false, t.fail(c, w, err)
			}
			req.SetBodyRaw(pre)
			return false, true
		}
		c.body.StartFixed(w.br, int64(cl))
		c.body.LimitedBy(c)
		req.SetBodyStream(&c.body, cl)
		return true, true
	}

	// Chunked: decoded here up to streamBytes, so that a small body is
	// checked whole (and a malformed one refused) before the handler runs;
	// a larger one is streamed, starting with what was decoded.
	c.body.StartChunked(w.br, t.maxBody, t.trailerBytes)
	c.body.LimitedBy(c)
	pre := w.pre[:0]
	for {
		if len(pre) == cap(pre) {
			pre = slices.Grow(pre, min(max(cap(pre), transport.MinBodyBuffer), t.streamBytes+1))
		}
		n, err := c.body.Read(pre[len(pre):cap(pre)])
		pre = pre[:len(pre)+n]
		if err == io.EOF {
			w.pre = pre
			c.body = codec.Body{}
			if len(pre) == 0 {
				req.Header.SetContentLength(0)
			} else {
				req.SetBodyRaw(pre)
			}
			return false, true
		}
		if err != nil {
			w.pre = pre
			c.body = codec.Body{}
			return false, t.fail(c, w, err)
		}
		if len(pre) > t.streamBytes {
			w.pre = pre
			c.body.SetPending(pre)
			req.SetBodyStream(&c.body, -1)
			return true, true
		}
	}
}

// fail answers a request that could not be read; the connection then
// closes. A client that went away gets no answer.
func (t *reactorTransport) fail(c *clientConn, w *serveState, err error) bool {
	var nothing fasthttp.ErrNothingRead
	if errors.Is(err, io.EOF) || errors.As(err, &nothing) || isGone(c.rerr) || c.tlsHandshakeFailed() {
		return t.drop(c, w)
	}
	c.body = codec.Body{}
	t.h.ServeError(err, t.context(c, w))
	w.resp.Header.SetConnectionClose()
	c.armWrite()
	if w.resp.Write(w.bw) == nil {
		_ = c.flushOut()
	}
	pipeline.Release(w.ctx)
	w.req.Reset()
	w.resp.Reset()
	// The rest of the request, or more of them, may still be on the way.
	c.linger = true
	return false
}

// drop gives up on the connection without answering.
func (t *reactorTransport) drop(c *clientConn, w *serveState) bool {
	c.body = codec.Body{}
	w.req.Reset()
	w.resp.Reset()
	return false
}

// readFixedBody appends a body of n bytes from br to dst, growing dst as the
// bytes arrive (doubling from transport.MinBodyBuffer), never to n ahead of them.
func readFixedBody(br *bufio.Reader, dst []byte, n int) ([]byte, error) {
	for len(dst) < n {
		if len(dst) == cap(dst) {
			dst = slices.Grow(dst, min(max(cap(dst), transport.MinBodyBuffer), n-len(dst)))
		}
		m, err := br.Read(dst[len(dst):min(cap(dst), n)])
		dst = dst[:len(dst)+m]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return dst, err
		}
	}
	return dst, nil
}
