package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"log"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate/tollgate/internal/bytesconv"
	"github.com/tollgate/tollgate/internal/grpcwire"
	"github.com/tollgate/tollgate/internal/h2frame"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The lean engine: the order service over h2c (prior knowledge) with one
// goroutine per connection, frames read in place and answers written
// into a buffer that is flushed once the connection has no more input
// (so the answers to calls that arrived together leave in one write),
// header blocks through the dynamic table (internal/hpackenc), and
// messages read and written as wire bytes (orders.go). It answers as
// grpc-go serving grpcorders does, at a fraction of the CPU: the benches
// then measure the gateway beside a backend as cheap as the HTTP one.

// Limits the engine announces and holds clients to.
const (
	leanMaxStreams  = 1000
	leanHeaderList  = 64 << 10
	leanMaxMessage  = 4 << 20
	leanReadFrame   = 16384 // the default: the engine asks for no larger
	leanConnWindow  = 16 << 20
	leanStreamStart = 65535 // a stream's window, as HTTP/2 starts it
)

func serveLean(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		go newLeanConn(c).serve()
	}
}

// leanConn is one client connection. Its reader handles frames holding
// mu; a delayed answer's timer takes mu to write.
type leanConn struct {
	c   net.Conn
	br  *bufio.Reader
	dec *hpack.Decoder

	mu      sync.Mutex
	bw      *bufio.Writer
	enc     leanEncoder
	block   leanBlock
	streams map[uint32]*leanStream
	spare   []*leanStream
	lastID  uint32
	reply   []byte // a reply message being built
	request createRequest

	// Sending: the client's windows and frame size.
	connWin  int64
	initWin  int64
	maxFrame int
	held     []*leanStream // answers waiting for window
	// Receiving: connection window taken and not yet given back.
	unacked int
}

// leanBlock is the header block being read.
type leanBlock struct {
	open      bool
	stream    uint32
	endStream bool
	bytes     int
	list      int
	path      string
	timeout   time.Duration // grpc-timeout, 0 for none
}

// leanStream is one call.
type leanStream struct {
	id      uint32
	path    string
	msg     []byte // the request's DATA so far
	recv    int    // stream window taken and not yet given back
	win     int64  // the client's window for the answer
	out     []byte // answer DATA held for window
	trace   string // the x-order-trace trailer, sent once out is
	timeout time.Duration
	ended   bool // the request is whole
	done    bool // answered or reset
	delayed bool // a timer will answer it
}

func newLeanConn(c net.Conn) *leanConn {
	lc := &leanConn{c: c, br: bufio.NewReaderSize(c, 64<<10), bw: bufio.NewWriterSize(c, 64<<10),
		streams: map[uint32]*leanStream{}, connWin: 65535, initWin: 65535, maxFrame: 16384}
	lc.enc.scratch = make([]byte, 0, 64) // a control frame's bytes
	lc.dec = hpack.NewDecoder(4096, lc.onField)
	lc.dec.SetMaxStringLength(leanHeaderList)
	return lc
}

// errLeanProtocol is a client breaking HTTP/2: GOAWAY, and the
// connection ends.
type errLeanProtocol struct {
	code http2.ErrCode
	msg  string
}

func (e errLeanProtocol) Error() string { return e.code.String() + ": " + e.msg }

var errLeanPadding = protocolError("padding longer than its frame")

func protocolError(msg string) error { return errLeanProtocol{http2.ErrCodeProtocol, msg} }

func (lc *leanConn) serve() {
	defer lc.c.Close()
	defer lc.stopTimers()
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(lc.br, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	lc.mu.Lock()
	lc.bw.Write(appendSettings(nil))
	lc.bw.Write(h2frame.AppendWindowUpdate(nil, 0, leanConnWindow-65535))
	err := lc.bw.Flush()
	lc.mu.Unlock()
	for err == nil {
		err = lc.readFrame()
	}
	var pe errLeanProtocol
	if errors.As(err, &pe) {
		lc.mu.Lock()
		lc.bw.Write(h2frame.AppendGoAway(nil, lc.lastID, pe.code))
		_ = lc.bw.Flush()
		lc.mu.Unlock()
		log.Printf("grpcupstream: %s: %v", lc.c.RemoteAddr(), err)
	}
}

// readFrame reads and handles one frame, then flushes what is to be
// written when no more input is waiting.
func (lc *leanConn) readFrame() error {
	head, err := lc.br.Peek(9)
	if err != nil {
		return err
	}
	length, typ, flags, id := h2frame.ReadHeader(head)
	if length > leanReadFrame {
		return errLeanProtocol{http2.ErrCodeFrameSize, "a frame of " + strconv.Itoa(length) + " bytes"}
	}
	frame, err := lc.br.Peek(9 + length)
	if err != nil {
		return err
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if err := lc.frame(typ, flags, id, frame[9:]); err != nil {
		return err
	}
	_, _ = lc.br.Discard(9 + length)
	if lc.br.Buffered() > 0 {
		return nil
	}
	if lc.unacked > 0 {
		lc.bw.Write(h2frame.AppendWindowUpdate(lc.enc.scratch[:0], 0, uint32(lc.unacked)))
		lc.unacked = 0
	}
	return lc.bw.Flush()
}

// frame handles one frame (p its payload, valid until the next read).
func (lc *leanConn) frame(typ http2.FrameType, flags http2.Flags, id uint32, p []byte) error {
	if lc.block.open && (typ != http2.FrameContinuation || id != lc.block.stream) {
		return protocolError("a frame inside a header block")
	}
	switch typ {
	case http2.FrameHeaders:
		return lc.headers(flags, id, p)
	case http2.FrameContinuation:
		if !lc.block.open {
			return protocolError("CONTINUATION outside a header block")
		}
		return lc.fragment(p, flags&http2.FlagHeadersEndHeaders != 0)
	case http2.FrameData:
		return lc.data(flags, id, p)
	case http2.FrameSettings:
		return lc.settings(flags, id, p)
	case http2.FramePing:
		if len(p) != 8 || id != 0 {
			return errLeanProtocol{http2.ErrCodeFrameSize, "a malformed PING"}
		}
		if flags&http2.FlagSettingsAck == 0 {
			b := h2frame.AppendHeader(lc.enc.scratch[:0], 8, http2.FramePing, http2.FlagSettingsAck, 0)
			lc.bw.Write(append(b, p...))
		}
	case http2.FrameWindowUpdate:
		return lc.windowUpdate(id, p)
	case http2.FrameRSTStream:
		if len(p) != 4 || id == 0 {
			return protocolError("a malformed RST_STREAM")
		}
		if st := lc.streams[id]; st != nil {
			lc.finish(st)
		}
	case http2.FramePushPromise:
		return protocolError("a client may not push")
	}
	return nil // PRIORITY, GOAWAY and unknown types: nothing to do
}

// headers starts a call (or ends one whose request came with trailers).
func (lc *leanConn) headers(flags http2.Flags, id uint32, p []byte) error {
	if id == 0 || id&1 == 0 {
		return protocolError("HEADERS on a stream a client may not open")
	}
	frag, ok := h2frame.Unpad(flags, p)
	if !ok {
		return errLeanPadding
	}
	if flags&http2.FlagHeadersPriority != 0 {
		if len(frag) < 5 {
			return protocolError("HEADERS too short for its priority")
		}
		frag = frag[5:]
	}
	if id <= lc.lastID && lc.streams[id] == nil {
		return errLeanProtocol{http2.ErrCodeStreamClosed, "HEADERS on a closed stream"}
	}
	lc.block = leanBlock{open: true, stream: id, endStream: flags&http2.FlagDataEndStream != 0}
	return lc.fragment(frag, flags&http2.FlagHeadersEndHeaders != 0)
}

// fragment decodes part of the open header block; the block's end opens
// the stream (or ends its request).
func (lc *leanConn) fragment(frag []byte, last bool) error {
	b := &lc.block
	if b.bytes += len(frag); b.bytes > leanHeaderList {
		return errLeanProtocol{http2.ErrCodeEnhanceYourCalm, "a header block over the limit"}
	}
	if _, err := lc.dec.Write(frag); err != nil {
		return errLeanProtocol{http2.ErrCodeCompression, err.Error()}
	}
	if !last {
		return nil
	}
	if err := lc.dec.Close(); err != nil {
		return errLeanProtocol{http2.ErrCodeCompression, err.Error()}
	}
	blk := *b
	*b = leanBlock{}
	if st := lc.streams[blk.stream]; st != nil {
		if !blk.endStream {
			return protocolError("trailers without END_STREAM")
		}
		return lc.endRequest(st)
	}
	lc.lastID = blk.stream
	if blk.list > leanHeaderList || blk.path == "" {
		lc.bw.Write(h2frame.AppendRSTStream(lc.enc.scratch[:0], blk.stream, http2.ErrCodeRefusedStream))
		return nil
	}
	if len(lc.streams) >= leanMaxStreams {
		lc.bw.Write(h2frame.AppendRSTStream(lc.enc.scratch[:0], blk.stream, http2.ErrCodeRefusedStream))
		return nil
	}
	st := lc.newStream(blk.stream, blk.path)
	st.timeout = blk.timeout
	if blk.endStream {
		return lc.endRequest(st)
	}
	return nil
}

// onField is the decoder's emit function.
func (lc *leanConn) onField(f hpack.HeaderField) {
	b := &lc.block
	b.list += int(f.Size())
	switch f.Name {
	case ":path":
		b.path = f.Value
	case "grpc-timeout":
		b.timeout, _ = grpcwire.ParseTimeout(bytesconv.S2B(f.Value))
	}
}

func (lc *leanConn) newStream(id uint32, path string) *leanStream {
	var st *leanStream
	if n := len(lc.spare); n > 0 {
		st = lc.spare[n-1]
		lc.spare = lc.spare[:n-1]
		*st = leanStream{msg: st.msg[:0], out: st.out[:0]}
	} else {
		st = &leanStream{}
	}
	st.id, st.path, st.win = id, path, lc.initWin
	lc.streams[id] = st
	return st
}

// finish forgets a call answered or reset; its state is kept for the next.
func (lc *leanConn) finish(st *leanStream) {
	if st.done {
		return
	}
	st.done = true
	delete(lc.streams, st.id)
	if !st.delayed && len(lc.spare) < 256 && cap(st.msg) <= 64<<10 {
		lc.spare = append(lc.spare, st)
	}
}

// data takes a request's DATA, within the message cap.
func (lc *leanConn) data(flags http2.Flags, id uint32, p []byte) error {
	if id == 0 {
		return protocolError("DATA on stream 0")
	}
	lc.unacked += len(p)
	st := lc.streams[id]
	if st == nil {
		if id > lc.lastID {
			return protocolError("DATA on a stream not opened")
		}
		return nil // a stream reset or answered: its bytes are dropped
	}
	if st.ended {
		return errLeanProtocol{http2.ErrCodeStreamClosed, "DATA after the request's end"}
	}
	body, ok := h2frame.Unpad(flags, p)
	if !ok {
		return errLeanPadding
	}
	if len(st.msg)+len(body) > leanMaxMessage+5 {
		lc.answer(st, orderCall{code: codeResourceExhaust,
			message: "grpc: received message larger than max (" + strconv.Itoa(len(st.msg)+len(body)-5) + " vs. " + strconv.Itoa(leanMaxMessage) + ")"})
		lc.bw.Write(h2frame.AppendRSTStream(lc.enc.scratch[:0], id, http2.ErrCodeCancel))
		return nil
	}
	st.msg = append(st.msg, body...)
	if flags&http2.FlagDataEndStream != 0 {
		return lc.endRequest(st)
	}
	if st.recv += len(p); st.recv >= leanStreamStart/2 {
		lc.bw.Write(h2frame.AppendWindowUpdate(lc.enc.scratch[:0], id, uint32(st.recv)))
		st.recv = 0
	}
	return nil
}

// endRequest makes the call once its request is whole.
func (lc *leanConn) endRequest(st *leanStream) error {
	st.ended = true
	m := st.msg
	var call orderCall
	switch {
	case len(m) < 5 || int(binary.BigEndian.Uint32(m[1:5])) != len(m)-5:
		call = orderCall{code: codeInternal, message: "grpc: the request is not one message"}
	case m[0] != 0:
		call = orderCall{code: codeUnimplemented, message: "grpc: compressed requests are not served"}
	default:
		call = serveOrders(st.path, m[5:], lc.reply, &lc.request)
		lc.reply = call.reply[:0]
	}
	if call.hang {
		if st.timeout == 0 {
			return nil // answered never: the client resets it or goes
		}
		// As a server does when the call's grpc-timeout passes.
		call = orderCall{code: codeDeadlineExceeded, message: "context deadline exceeded", trace: call.trace, delay: st.timeout}
	}
	if call.delay > 0 {
		st.delayed = true
		call.reply = append([]byte(nil), call.reply...)
		time.AfterFunc(call.delay, func() {
			lc.mu.Lock()
			defer lc.mu.Unlock()
			if !st.done {
				lc.answer(st, call)
				_ = lc.bw.Flush()
			}
		})
		return nil
	}
	lc.answer(st, call)
	return nil
}

func (lc *leanConn) stopTimers() {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	for _, st := range lc.streams {
		st.done = true // a timer still to run writes nothing
	}
}
