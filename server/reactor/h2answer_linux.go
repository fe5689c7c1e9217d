//go:build linux

package reactor

import (
	"io"

	"github.com/tollgate/tollgate/internal/hpackenc"
	"github.com/tollgate/tollgate/server/h2"
	"github.com/tollgate/tollgate/server/transport"
	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"
)

// writeAnswer sends the handler's answer on the stream: HEADERS with the
// fields an HTTP/1.1 client would have got, less the connection-specific
// ones; the body as DATA within the client's windows (a streamed one a
// piece at a time, so the stream holds a window of it, never the whole);
// then the trailers (a passed-through gRPC call's status), if any.
func (st *h2Stream) writeAnswer() {
	h, resp := st.h, &st.resp
	status := resp.StatusCode()
	if status < 200 {
		// A protocol switch cannot happen on a stream (extended CONNECT
		// is not offered) and a backend's interim answer has no place.
		resp.Reset()
		status = fasthttp.StatusBadGateway
		resp.SetStatusCode(status)
		resp.Header.SetContentType("application/json")
		resp.SetBodyString(`{"error":"bad_gateway","message":"protocol switch not possible over HTTP/2"}`)
	}
	trailers := false
	for range resp.Header.Trailers() {
		trailers = true
		break
	}
	streamed := resp.IsBodyStream() && !st.info.IsHead
	var body []byte
	if !streamed && !st.info.IsHead {
		body = resp.Body()
	}
	st.writeUntil = h.t.now() + int64(h.writeTimeout())
	if h.waitRoom(st) != nil {
		return
	}
	h.blk = hpackenc.AppendStatus(h.blk[:0], status)
	h2.AnswerFields(resp.Header.Header(), h.emitFn)
	noBody := !streamed && len(body) == 0
	h.writeBlock(st.id, noBody && !trailers)

	var err error
	switch {
	case streamed:
		err = st.writeStreamed(resp, !trailers)
		h.t.noteStream(err)
	case len(body) > 0:
		err = st.writeData(body, !trailers, defaultStreamWindow)
	}
	if err == nil && trailers {
		err = st.writeTrailers(resp)
	}
	if err != nil {
		if !st.reset && !h.dead {
			h.resetStream(st.id, http2.ErrCodeInternal)
		}
		return
	}
	if st.remoteOpen {
		// Answered before the client finished its body: it may stop
		// sending (RFC 9113 §8.1).
		h.resetStream(st.id, http2.ErrCodeNo)
	}
}

// writeStreamed sends a body that streams from the backend as it comes,
// through one pooled piece the size of its window.
func (st *h2Stream) writeStreamed(resp *fasthttp.Response, end bool) error {
	body := resp.BodyStream()
	length := int64(resp.Header.ContentLength())
	window := defaultStreamWindow
	if wb, ok := body.(transport.Paced); ok && wb.Window() > 0 {
		window = wb.Window()
	}
	pool := &pieces[pieceFor(window)]
	var bp *[]byte // taken once the client opens a window
	defer func() {
		if bp != nil {
			pool.Put(bp)
		}
	}()
	var buf []byte
	var sent int64
	for {
		open, err := st.openWindow()
		if err != nil {
			return err
		}
		if bp == nil {
			bp = pool.Get().(*[]byte)
			buf = (*bp)[:min(max(window, 4<<10), len(*bp))]
		}
		// What the backend has is passed on as it comes (a gRPC stream's
		// messages must not wait for a piece to fill), and no more than
		// the client has room for, less a little.
		n, rerr := body.Read(buf[:min(len(buf), max(int(open), 4<<10))])
		if n > 0 {
			if err := st.writeData(buf[:n], false, window); err != nil {
				return err
			}
			sent += int64(n)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			st.h.t.streamsCut.Add(1)
			return errStreamCut
		}
	}
	if length >= 0 && sent != length {
		st.h.t.streamsCut.Add(1)
		return errStreamCut
	}
	if end {
		return st.endData()
	}
	return nil
}

// writeTrailers ends the stream with the answer's trailers.
func (st *h2Stream) writeTrailers(resp *fasthttp.Response) error {
	h := st.h
	if err := h.waitRoom(st); err != nil {
		return err
	}
	h.blk = h.blk[:0]
	for name := range resp.Header.Trailers() {
		for _, v := range resp.Header.PeekAll(string(name)) {
			h.blk, h.scratch = hpackenc.AppendField(h.blk, h.scratch, name, v)
		}
	}
	h.writeBlock(st.id, true)
	return nil
}
