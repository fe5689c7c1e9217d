//go:build linux

package reactor

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/server/h2"
	"github.com/tollgate/tollgate/server/transport"
	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"
)

// h2Stream is one request and its answer. The reader fills in the
// request's section and body; the stream's own fiber runs the handler,
// reads the body as the handler asks for it and writes the answer.
type h2Stream struct {
	h     *h2Conn
	id    uint32
	fiber *fiber
	run   func() // st.serve, bound once
	q     pipeline.ParkQueue

	head   []byte  // the request as HTTP/1.1, without the blank line
	info   h2.Head // what was learned building it
	failed error   // the request is answered with this error (400, 413, 431)

	inOpen      bool // counted in the connection's open streams
	remoteOpen  bool // the client may send more DATA
	ended       bool // its END_STREAM came: the body is whole
	reset       bool // closed before its answer ended
	clientReset bool // by the client's RST_STREAM
	gone        bool // the connection failed
	bodyErr     error

	// The request body: bytes received and not yet read, within the
	// stream's window.
	in       []byte
	off      int
	received int64
	recvWin  int64
	unacked  int64
	until    int64 // the body's read deadline (transport clock), 0 for none

	sendWin    int64
	wantWindow bool  // its fiber waits for a window to open
	writeUntil int64 // the answer's write deadline (transport clock)
	sinceRenew int   // answer bytes sent since it was renewed

	req  fasthttp.Request
	resp fasthttp.Response
	ctx  *pipeline.Ctx
	body h2Body
	hr   bytes.Reader
	br   *bufio.Reader
	pre  []byte
}

var h2Streams sync.Pool

func newH2Stream(h *h2Conn, id uint32) *h2Stream {
	st, _ := h2Streams.Get().(*h2Stream)
	if st == nil {
		st = &h2Stream{ctx: pipeline.NewOwned(), br: bufio.NewReaderSize(nil, 4096)}
		st.run = st.serve
		st.body.st = st
	}
	st.h, st.id = h, id
	st.recvWin = int64(h.o.StreamWindow)
	st.sendWin = h.peerWin
	return st
}

// release gives st back once nothing refers to it.
func (st *h2Stream) release() {
	st.h, st.fiber = nil, nil
	st.info, st.failed, st.bodyErr = h2.Head{}, nil, nil
	st.inOpen, st.remoteOpen, st.ended, st.reset, st.clientReset, st.gone = false, false, false, false, false, false
	st.in, st.off, st.received, st.unacked, st.until = st.in[:0], 0, 0, 0, 0
	st.sinceRenew, st.wantWindow = 0, false
	if cap(st.in) > 64<<10 {
		st.in = nil
	}
	if cap(st.pre) > 64<<10 {
		st.pre = nil
	}
	h2Streams.Put(st)
}

// counted takes st out of the open streams' count once; it reports 1 if
// it was in it.
func (st *h2Stream) counted() int {
	if !st.inOpen {
		return 0
	}
	st.inOpen = false
	return 1
}

// closeStream ends st in the protocol's view: it no longer counts among
// the open streams, and its fiber, if waiting for the client, wakes.
func (h *h2Conn) closeStream(st *h2Stream) {
	if st.inOpen {
		st.inOpen = false
		h.open--
		delete(h.streams, st.id)
	}
	if st.remoteOpen {
		// What it had received and nobody will read goes back to the
		// connection's window.
		st.remoteOpen = false
		h.giveBack(nil, int64(len(st.in)-st.off))
	}
	if !st.ended {
		st.reset = true
	}
	st.q.WakeOne()
	if st.fiber == nil {
		// Queued, never started.
		if i := slices.Index(h.queued, st); i >= 0 {
			h.queued = slices.Delete(h.queued, i, i+1)
			h.ran++
			h.earlyReset(st)
			st.release()
		}
	}
	h.noteIdle()
}

// failBody resets st for a body the protocol refuses.
func (st *h2Stream) failBody(code http2.ErrCode) {
	h := st.h
	st.bodyErr = http2.StreamError{StreamID: st.id, Code: code}
	h.resetStream(st.id, code)
	h.closeStream(st)
}

// noteIdle starts the idle timeout of a connection that has nothing open
// any more while its reader waits for frames, or ends one that drains.
func (h *h2Conn) noteIdle() {
	if !h.idle() || h.dead {
		return
	}
	if h.goingAway {
		h.wakeReader(0)
		return
	}
	h.armIdle()
	h.c.armReadDeadline()
	if h.c.rdl > 0 {
		h.wakeReader(h.c.rdl)
	}
}

// ended runs when st's fiber is done: its handler slot goes to the next
// stream queued, and the reader, if it waits for the streams to end,
// wakes.
func (h *h2Conn) streamDone(st *h2Stream) {
	h.handlers--
	if st.inOpen {
		h.closeStream(st)
	}
	if i := slices.Index(h.connWaiters, st); i >= 0 {
		h.connWaiters = slices.Delete(h.connWaiters, i, i+1)
	}
	st.release()
	for len(h.queued) > 0 && h.handlers < int(h.o.MaxConcurrentStreams) && !h.dead {
		next := h.queued[0]
		h.queued = slices.Delete(h.queued, 0, 1)
		h.start(next)
	}
	h.doneQ.WakeOne()
	h.noteIdle()
}

// serve runs on the stream's fiber: the handler answers the request, the
// answer is written.
func (st *h2Stream) serve() {
	h := st.h
	defer h.streamDone(st)
	h.ran++
	if st.reset || st.gone {
		// Reset while it waited for a handler: no backend sees it.
		h.earlyReset(st)
		return
	}
	t := h.t
	req, resp := &st.req, &st.resp
	defer func() {
		req.Reset()
		resp.Reset() // closes a streamed answer: its backend connection goes back or closes
	}()
	resp.Header.SetNoDefaultContentType(true)
	x := st.ctx
	x.Req, x.Resp, x.Peer, x.Loop = req, resp, h.c.peer, st.fiber
	defer pipeline.Release(x)

	err := st.failed
	if err == nil {
		err = st.readRequest()
	}
	switch {
	case st.reset || st.gone:
		h.earlyReset(st)
		return
	case errors.Is(err, errMalformedBody):
		return // reset already
	case err != nil:
		t.h.ServeError(err, x)
	default:
		t.h.Serve(x)
	}
	if up := x.Upgrade; up != nil {
		// A switch needs extended CONNECT, which is not offered; a
		// backend that switched anyway is not relayed.
		_ = up.Conn.Close()
		x.Upgrade = nil
	}
	if st.reset || st.gone {
		h.earlyReset(st)
		return
	}
	if st.info.GRPC {
		h2.GRPCError(resp)
	}
	st.writeAnswer()
	if d, ok := t.h.(interface{ Draining() bool }); ok && d.Draining() || t.shut.Load() {
		// The GOAWAY follows the answer, as an HTTP/1.1 client's carries
		// Connection: close while the gateway drains.
		h.goAway(http2.ErrCodeNo)
	}
}

// earlyReset counts a stream the client reset before it was answered
// and cuts the connection once resets are both many and most of its
// streams: a browser cancelling a few fetches stays, a flood does not.
func (h *h2Conn) earlyReset(st *h2Stream) {
	if !st.clientReset {
		return
	}
	h.resets++
	if h.resets <= h.o.MaxEarlyResets || 2*h.resets <= h.ran || h.dead {
		return
	}
	h.refused("", 0, "early_resets")
	h.fail()
}

var errMalformedBody = errors.New("h2: request body refused")

// readRequest parses the request's section, and reads its body whole up
// to StreamBodyBytes or starts streaming it.
func (st *h2Stream) readRequest() error {
	o := st.h.o
	if o.BodyTimeout > 0 {
		st.until = st.h.s.clock + int64(o.BodyTimeout)
	}
	body := st.pre[:0]
	streamed := false
	if !st.ended || st.off < len(st.in) {
		limit := o.StreamBodyBytes + 1
		for len(body) < limit {
			if len(body) == cap(body) {
				body = slices.Grow(body, min(max(cap(body), transport.MinBodyBuffer), limit-len(body)))
			}
			n, err := st.readBody(body[len(body):min(cap(body), limit)])
			body = body[:len(body)+n]
			if o.MaxBodyBytes > 0 && int64(len(body)) > o.MaxBodyBytes {
				st.pre = body
				return codec.ErrBodyTooLarge
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				st.pre = body
				if st.bodyErr != nil {
					return errMalformedBody
				}
				return err
			}
		}
		streamed = len(body) >= limit
	}
	st.pre = body
	h := st.head
	switch {
	case streamed && st.info.ContentLength < 0:
		h = append(h, "transfer-encoding: chunked\r\n"...)
	case !streamed && st.info.ContentLength < 0 && len(body) > 0:
		h = append(h, "content-length: "...)
		h = strconv.AppendInt(h, int64(len(body)), 10)
		h = append(h, "\r\n"...)
	}
	h = append(h, "\r\n"...)
	st.head = h
	st.hr.Reset(h)
	if len(h) > st.br.Size() {
		st.br = bufio.NewReaderSize(nil, len(h))
	}
	st.br.Reset(&st.hr)
	if err := st.req.Header.Read(st.br); err != nil {
		return err
	}
	switch {
	case streamed:
		st.body.start(body, o.MaxBodyBytes)
		st.req.SetBodyStream(&st.body, st.req.Header.ContentLength())
	case len(body) > 0:
		st.req.SetBodyRaw(body)
	}
	return nil
}

// readBody reads what the client sent of the body, waiting for it on the
// loop under the body's deadline; the windows reopen by what was read.
func (st *h2Stream) readBody(p []byte) (int, error) {
	h := st.h
	for st.off == len(st.in) {
		switch {
		case st.bodyErr != nil:
			return 0, st.bodyErr
		case st.gone || st.reset && !st.ended:
			return 0, net.ErrClosed
		case st.ended:
			return 0, io.EOF
		}
		d := time.Hour
		if st.until > 0 {
			if d = time.Duration(st.until - h.t.now()); d <= 0 {
				return 0, codec.ErrBodyTimeout
			}
		}
		h.park(st.fiber, &st.q, d)
	}
	n := copy(p, st.in[st.off:])
	st.off += n
	if st.off == len(st.in) {
		st.in, st.off = st.in[:0], 0
	}
	h.giveBack(st, int64(n))
	return n, nil
}

// giveBack reopens the windows by n bytes the gateway is done with: the
// connection's, and st's (nil for none) while its body is still coming.
// A window is reopened once half of it was taken, so a steady body costs
// a WINDOW_UPDATE per half window, not per frame.
func (h *h2Conn) giveBack(st *h2Stream, n int64) {
	if n <= 0 || h.dead {
		return
	}
	h.recvUnacked += n
	if h.recvUnacked >= int64(h.o.ConnWindow)/2 {
		_ = h.wf.WriteWindowUpdate(0, uint32(h.recvUnacked))
		h.recvWin += h.recvUnacked
		h.recvUnacked = 0
		h.kick()
	}
	if st == nil || !st.remoteOpen {
		return
	}
	st.unacked += n
	if st.unacked >= int64(h.o.StreamWindow)/2 {
		_ = h.wf.WriteWindowUpdate(st.id, uint32(st.unacked))
		st.recvWin += st.unacked
		st.unacked = 0
		h.kick()
	}
}

// h2Body is a streamed request body: its start, read already, then the
// stream's DATA as it comes, never past the body limit. The upstream step
// may bring its deadline forward (codec.BoundedBody).
type h2Body struct {
	st   *h2Stream
	pre  []byte
	left int64 // -1: no limit
}

func (b *h2Body) start(pre []byte, limit int64) {
	b.pre = pre
	b.left = -1
	if limit > 0 {
		b.left = limit - int64(len(pre))
	}
}

func (b *h2Body) Read(p []byte) (int, error) {
	if len(b.pre) > 0 {
		n := copy(p, b.pre)
		b.pre = b.pre[n:]
		return n, nil
	}
	n, err := b.st.readBody(p)
	if b.left >= 0 {
		if int64(n) > b.left {
			b.left = 0
			return 0, codec.ErrBodyTooLarge
		}
		b.left -= int64(n)
	}
	return n, err
}

// ReadBefore implements codec.BoundedBody: reads after the deadline fail
// with codec.ErrBodyTimeout; only the stream is cut.
func (b *h2Body) ReadBefore(deadline time.Time) {
	st := b.st
	if deadline.IsZero() {
		return
	}
	if at := st.h.t.clockAt(deadline); st.until == 0 || at < st.until {
		st.until = at
	}
}
