package upstream

import (
	"encoding/binary"
	"github.com/tollgate/tollgate/internal/h2frame"
	"golang.org/x/net/http2"
	"time"

	"github.com/tollgate/tollgate/internal/ascii"
	"github.com/tollgate/tollgate/internal/grpcwire"
	"github.com/tollgate/tollgate/internal/hpackenc"
	"github.com/tollgate/tollgate/pipeline"
)

// Writing to a loop's gRPC connection. A call's frames are appended to
// the connection's outgoing buffer and left there for the one request
// that writes: it lets the other requests of its loop's batch run first
// (pipeline.Loop.Yield), so the calls they add leave in the same write,
// and the backend reads them with one read. Header blocks are encoded
// without HPACK's dynamic table (internal/hpackenc), so a block depends
// on no other and no encoder state needs the write's order; a stream's
// number is taken when its frames are appended, which keeps streams
// opening in the order of their numbers.

// grpcLoopReadFrame is the largest frame the gateway reads: HTTP/2's
// default, as it never asks for larger ones.
const grpcLoopReadFrame = 16384

// grpcLoopHeaderList bounds an answer's header list (names, values and
// 32 bytes a field, as SETTINGS_MAX_HEADER_LIST_SIZE counts), which the
// gateway also announces.
const grpcLoopHeaderList = 64 << 10

// appendPreface is what the gateway says first: the client preface, its
// settings and the connection's larger window.
func appendPreface(dst []byte) []byte {
	dst = append(dst, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"...)
	dst = h2frame.AppendHeader(dst, 18, http2.FrameSettings, 0, 0)
	dst = h2frame.AppendSetting(dst, http2.SettingEnablePush, 0)
	dst = h2frame.AppendSetting(dst, http2.SettingInitialWindowSize, grpcLoopStreamWindow)
	dst = h2frame.AppendSetting(dst, http2.SettingMaxHeaderListSize, grpcLoopHeaderList)
	return h2frame.AppendWindowUpdate(dst, 0, grpcLoopConnWindow-65535)
}

// appendCall appends the call's HEADERS (and CONTINUATION) and its one
// DATA frame, taking the stream's number.
func (cc *grpcLoopConn) appendCall(c *pipeline.Ctx, call *grpcLoopCall, method string, msg []byte, timeout time.Duration) {
	call.id = cc.nextID
	cc.nextID += 2
	cc.calls[call.id] = call
	block := cc.headerBlock(c, method, timeout)
	first := true
	for len(block) > 0 || first {
		chunk := block[:min(len(block), cc.maxFrame)]
		block = block[len(chunk):]
		var flags http2.Flags
		if len(block) == 0 {
			flags = http2.FlagHeadersEndHeaders
		}
		typ := http2.FrameContinuation
		if first {
			typ, first = http2.FrameHeaders, false
		}
		cc.out = h2frame.AppendHeader(cc.out, len(chunk), typ, flags, call.id)
		cc.out = append(cc.out, chunk...)
	}
	// One gRPC message: not compressed, its length, its bytes; as much
	// of it now as the backend's windows allow.
	call.msg, call.sent, call.sendWin = msg, 0, cc.peerWin
	call.prefix[0] = 0
	binary.BigEndian.PutUint32(call.prefix[1:], uint32(len(msg)))
	cc.appendData(call)
}

// appendData appends the call's message from where it stands, in DATA
// frames, as far as the connection's and the stream's windows allow; the
// last carries END_STREAM.
func (cc *grpcLoopConn) appendData(call *grpcLoopCall) {
	size := len(call.msg) + len(call.prefix)
	for call.sent < size {
		n := int(min(int64(size-call.sent), int64(cc.maxFrame), cc.sendWin, call.sendWin))
		if n <= 0 {
			return
		}
		var flags http2.Flags
		if call.sent+n == size {
			flags = http2.FlagDataEndStream
		}
		off := call.sent
		cc.out = h2frame.AppendHeader(cc.out, n, http2.FrameData, flags, call.id)
		if off < len(call.prefix) {
			k := min(off+n, len(call.prefix))
			cc.out = append(cc.out, call.prefix[off:k]...)
			n -= k - off
			off = k
		}
		cc.out = append(cc.out, call.msg[off-len(call.prefix):off-len(call.prefix)+n]...)
		sent := off + n - call.sent
		call.sent += sent
		cc.sendWin -= int64(sent)
		call.sendWin -= int64(sent)
	}
}

// sending reports whether the call has more of its message to send and
// the windows let some of it go.
func (cc *grpcLoopConn) sending(call *grpcLoopCall) bool {
	return call.sent < len(call.msg)+len(call.prefix) && cc.sendWin > 0 && call.sendWin > 0
}

// headerBlock encodes the call's header section: the method's fixed
// fields through the connection's HPACK table (a byte each once the
// backend's decoder holds them, kept encoded per method), its timeout,
// and the request's forwarding fields as outgoingMetadata chooses them
// (their names by index, their values as literals unless they are the
// first ones seen: most change from request to request).
func (cc *grpcLoopConn) headerBlock(c *pipeline.Ctx, method string, timeout time.Duration) []byte {
	b := cc.table.BeginBlock(cc.hbuf[:0])
	if f, ok := cc.fixed[method]; ok && f.gen == cc.table.Gen() {
		b = append(b, f.block...)
	} else {
		start := len(b)
		gen := cc.table.Gen()
		b = hpackenc.AppendIndexed(b, hpackenc.MethodPost)
		scheme := uint8(hpackenc.SchemeHTTP)
		if cc.tls.on {
			scheme = hpackenc.SchemeHTTPS
		}
		b = hpackenc.AppendIndexed(b, scheme)
		b = cc.table.AppendField(b, ":path", method)
		b = cc.table.AppendField(b, ":authority", cc.in.Addr)
		b = cc.table.AppendField(b, "content-type", "application/grpc")
		b = cc.table.AppendField(b, "te", "trailers")
		b = cc.table.AppendField(b, "user-agent", "tollgate")
		// A block that entered fields says so once; the one kept is the
		// next, which names them.
		if gen == cc.table.Gen() && (ok || len(cc.fixed) < grpcLoopMethods) {
			cc.fixed[method] = grpcFixedFields{block: append(f.block[:0], b[start:]...), gen: gen}
		}
	}
	cc.num = grpcwire.AppendTimeout(cc.num[:0], timeout)
	b, cc.lower = hpackenc.AppendRawField(b, cc.lower, grpcTimeoutName, cc.num)
	l := &c.Fields
	for i := range l.Len() {
		name, value := l.Field(i)
		if grpcMetadataName(name) && printable(value) {
			cc.lower = ascii.AppendLower(cc.lower[:0], name)
			b = cc.table.AppendVaryingField(b, cc.lower, value)
		}
	}
	cc.hbuf = b
	return b
}

// grpcFixedFields is a method's fixed fields encoded under the table's
// gen.
type grpcFixedFields struct {
	block []byte
	gen   int
}

// grpcLoopMethods bounds the methods whose fixed fields a connection
// keeps encoded.
const grpcLoopMethods = 64

var grpcTimeoutName = []byte("grpc-timeout")

// flushOut writes the outgoing buffer unless another request is writing
// it (which then writes what was added meanwhile too); loop is the
// writing request's. With gather set, the loop's other requests of the
// batch run first and add their calls.
func (cc *grpcLoopConn) flushOut(loop pipeline.Loop, gather bool, deadline time.Time) error {
	if cc.flushing {
		return nil
	}
	cc.flushing = true
	defer func() { cc.flushing = false }()
	if gather {
		loop.Yield()
	}
	for cc.err == nil {
		cc.appendOwed()
		if len(cc.out) == 0 {
			return nil
		}
		// Appended to while this write waits: the buffers take turns.
		cc.out, cc.flight = cc.flight[:0], cc.out
		_ = cc.conn.SetWriteDeadline(deadline)
		if err := cc.writeSession(loop, cc.flight); err != nil {
			cc.fail(err)
			return err
		}
		if cap(cc.flight) > grpcLoopKeptBuffer {
			cc.flight = nil
		}
	}
	return cc.err
}

// grpcLoopKeptBuffer bounds the outgoing buffer a connection keeps
// between writes.
const grpcLoopKeptBuffer = 256 << 10

// flushOwed writes what is owed the backend (acknowledgements, windows,
// resets) now, unless a write is under way (which takes it along).
func (cc *grpcLoopConn) flushOwed(loop pipeline.Loop, now time.Time) {
	if !cc.owe.any() && len(cc.out) == 0 {
		return
	}
	_ = cc.flushOut(loop, false, now.Add(time.Second))
}

func (o *grpcLoopOwed) any() bool {
	return o.settingsAck || len(o.pings) > 0 || o.connWindow > 0 || len(o.streams) > 0 || len(o.resets) > 0
}

// appendOwed moves what is owed the backend into the outgoing buffer.
func (cc *grpcLoopConn) appendOwed() {
	o := &cc.owe
	if !o.any() {
		return
	}
	b := cc.out
	if o.settingsAck {
		b = h2frame.AppendHeader(b, 0, http2.FrameSettings, http2.FlagSettingsAck, 0)
		o.settingsAck = false
	}
	for _, p := range o.pings {
		b = h2frame.AppendHeader(b, 8, http2.FramePing, http2.FlagSettingsAck, 0)
		b = append(b, p[:]...)
	}
	o.pings = o.pings[:0]
	if o.connWindow > 0 {
		b = h2frame.AppendWindowUpdate(b, 0, o.connWindow)
		o.connWindow = 0
	}
	for _, s := range o.streams {
		b = h2frame.AppendWindowUpdate(b, s.id, s.n)
	}
	o.streams = o.streams[:0]
	for _, id := range o.resets {
		b = h2frame.AppendRSTStream(b, id, http2.ErrCodeCancel)
	}
	o.resets = o.resets[:0]
	cc.out = b
}
