package upstream

import (
	"encoding/binary"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/internal/h2frame"
	"github.com/tollgate/tollgate/pipeline"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

// grpcLoopFrameTime bounds reading the rest of a frame once its header
// came: a backend that stops mid-frame has broken the connection.
const grpcLoopFrameTime = 5 * time.Second

// errGRPCLoopProtocol is a backend breaking HTTP/2's rules: the
// connection ends.
type errGRPCLoopProtocol string

func (e errGRPCLoopProtocol) Error() string { return "grpc: the backend broke HTTP/2: " + string(e) }

const errGRPCLoopPadding = errGRPCLoopProtocol("padding longer than its frame")

// readFor reads frames for the calls of the connection until call is
// done, its deadline passes or the connection fails, then passes the
// reading to another call still waiting. Frames are read in place from
// the connection's buffer, which holds the largest one.
func (cc *grpcLoopConn) readFor(loop pipeline.Loop, call *grpcLoopCall, deadline time.Time) {
	cc.reading, cc.tls.reader = true, loop
	defer func() {
		cc.reading, cc.tls.reader = false, nil
		cc.passReading()
	}()
	for !call.done && cc.err == nil && !cc.sending(call) {
		// Waiting for a frame to begin is bounded by this call's
		// deadline and consumes nothing: another call may take over.
		_ = cc.conn.SetReadDeadline(deadline)
		head, err := cc.br.Peek(9)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return
			}
			cc.fail(err)
			return
		}
		length, typ, flags, stream := h2frame.ReadHeader(head)
		if length > grpcLoopReadFrame {
			cc.fail(errGRPCLoopProtocol("a frame of " + strconv.Itoa(length) + " bytes, over the 16384 allowed"))
			return
		}
		now := loop.Now()
		_ = cc.conn.SetReadDeadline(now.Add(grpcLoopFrameTime))
		frame, err := cc.br.Peek(9 + length)
		if err != nil {
			cc.fail(err)
			return
		}
		if err := cc.frame(typ, flags, stream, frame[9:]); err != nil {
			cc.fail(err)
			return
		}
		_, _ = cc.br.Discard(9 + length)
		cc.flushOwed(loop, now)
	}
}

// passReading wakes a call still waiting for its answer to read the
// connection next.
func (cc *grpcLoopConn) passReading() {
	for _, other := range cc.calls {
		if other.waiting && !other.done {
			other.q.WakeOne()
			return
		}
	}
}

// frame applies one frame (p its payload, valid until the next read).
func (cc *grpcLoopConn) frame(typ http2.FrameType, flags http2.Flags, stream uint32, p []byte) error {
	if cc.block.open && typ != http2.FrameContinuation {
		return errGRPCLoopProtocol("a frame inside a header block")
	}
	switch typ {
	case http2.FrameData, http2.FrameHeaders:
		if stream == 0 || stream&1 == 0 || stream >= cc.nextID {
			return errGRPCLoopProtocol("a frame on a stream the gateway did not open")
		}
		if typ == http2.FrameData {
			return cc.data(stream, flags, p)
		}
		frag, ok := h2frame.Unpad(flags, p)
		if !ok {
			return errGRPCLoopPadding
		}
		if flags&http2.FlagHeadersPriority != 0 {
			if len(frag) < 5 {
				return errGRPCLoopProtocol("a HEADERS frame too short for its priority")
			}
			frag = frag[5:]
		}
		cc.beginBlock(stream, flags&http2.FlagDataEndStream != 0)
		return cc.blockFragment(frag, flags&http2.FlagHeadersEndHeaders != 0)
	case http2.FrameContinuation:
		if !cc.block.open || stream != cc.block.stream {
			return errGRPCLoopProtocol("a CONTINUATION frame outside its header block")
		}
		return cc.blockFragment(p, flags&http2.FlagHeadersEndHeaders != 0)
	case http2.FrameSettings:
		return cc.settings(flags, stream, p)
	case http2.FramePing:
		if len(p) != 8 || stream != 0 {
			return errGRPCLoopProtocol("a malformed PING")
		}
		if flags&http2.FlagSettingsAck == 0 && len(cc.owe.pings) < 16 {
			cc.owe.pings = append(cc.owe.pings, [8]byte(p))
		}
	case http2.FrameWindowUpdate:
		if len(p) != 4 {
			return errGRPCLoopProtocol("a malformed WINDOW_UPDATE")
		}
		cc.windowUpdate(stream, int64(binary.BigEndian.Uint32(p)&0x7fffffff))
	case http2.FrameGoAway:
		if len(p) < 8 || stream != 0 {
			return errGRPCLoopProtocol("a malformed GOAWAY")
		}
		last := binary.BigEndian.Uint32(p) & 0x7fffffff
		cc.goAway = true
		for id, call := range cc.calls {
			if id > last {
				cc.end(call, codes.Unavailable, "the backend is closing the connection (GOAWAY)")
			}
		}
	case http2.FrameRSTStream:
		if len(p) != 4 || stream == 0 {
			return errGRPCLoopProtocol("a malformed RST_STREAM")
		}
		if call := cc.calls[stream]; call != nil {
			cc.resetByBackend(call, http2.ErrCode(binary.BigEndian.Uint32(p)))
		}
	case http2.FramePushPromise:
		return errGRPCLoopProtocol("a PUSH_PROMISE, which the gateway refused")
	}
	// PRIORITY and frame types it does not know are ignored (RFC 9113
	// §5.5).
	return nil
}

// windowUpdate opens the connection's window (stream 0) or a call's, and
// wakes the calls it lets send more.
func (cc *grpcLoopConn) windowUpdate(stream uint32, n int64) {
	if stream == 0 {
		cc.sendWin = min(cc.sendWin+n, 1<<31-1)
		cc.wakeSenders()
		return
	}
	if call := cc.calls[stream]; call != nil {
		call.sendWin = min(call.sendWin+n, 1<<31-1)
		if call.waiting && cc.sending(call) {
			call.q.WakeOne()
		}
	}
}

// wakeSenders wakes the waiting calls the windows now let send more.
func (cc *grpcLoopConn) wakeSenders() {
	for _, call := range cc.calls {
		if call.waiting && cc.sending(call) {
			call.q.WakeOne()
		}
	}
}

// settings applies the backend's SETTINGS and owes their acknowledgement.
func (cc *grpcLoopConn) settings(flags http2.Flags, stream uint32, p []byte) error {
	if stream != 0 || len(p)%6 != 0 || flags&http2.FlagSettingsAck != 0 && len(p) > 0 {
		return errGRPCLoopProtocol("a malformed SETTINGS")
	}
	if flags&http2.FlagSettingsAck != 0 {
		return nil
	}
	for ; len(p) > 0; p = p[6:] {
		v := binary.BigEndian.Uint32(p[2:])
		switch http2.SettingID(binary.BigEndian.Uint16(p)) {
		case http2.SettingHeaderTableSize:
			cc.table.SetLimit(v)
		case http2.SettingMaxConcurrentStreams:
			cc.maxCalls = int(min(v, 10000))
		case http2.SettingInitialWindowSize:
			if v > 1<<31-1 {
				return errGRPCLoopProtocol("an initial window over 2^31-1")
			}
			// It changes the windows of the streams open too.
			for _, call := range cc.calls {
				call.sendWin += int64(v) - cc.peerWin
			}
			cc.peerWin = int64(v)
			cc.wakeSenders()
		case http2.SettingMaxFrameSize:
			if v < 16384 || v > 1<<24-1 {
				return errGRPCLoopProtocol("a max frame size out of range")
			}
			cc.maxFrame = int(min(v, 1<<20))
		}
	}
	cc.owe.settingsAck = true
	for range cc.maxCalls - len(cc.calls) {
		if !cc.slots.WakeOne() {
			break
		}
	}
	return nil
}

// resetByBackend ends a call the backend reset.
func (cc *grpcLoopConn) resetByBackend(call *grpcLoopCall, errCode http2.ErrCode) {
	code := codes.Internal
	switch errCode {
	case http2.ErrCodeRefusedStream:
		code = codes.Unavailable
	case http2.ErrCodeCancel:
		code = codes.Canceled
	case http2.ErrCodeEnhanceYourCalm:
		code = codes.ResourceExhausted
	}
	cc.end(call, code, "stream reset by the backend: "+errCode.String())
}

// beginBlock starts decoding a header block of stream. Every block goes
// through the decoder, a forgotten call's too: the backend's encoder
// counts on the decoder seeing them all.
func (cc *grpcLoopConn) beginBlock(stream uint32, endStream bool) {
	call := cc.calls[stream]
	if call != nil && call.done {
		call = nil
	}
	cc.block = grpcLoopBlock{open: true, stream: stream, endStream: endStream, call: call}
	if call != nil && call.metadata {
		cc.block.md = metadata.MD{}
	}
	cc.dec.SetEmitEnabled(call != nil)
}

// blockFragment decodes a fragment of the open header block, and applies
// the block once its last fragment came.
func (cc *grpcLoopConn) blockFragment(frag []byte, last bool) error {
	b := &cc.block
	if b.bytes += len(frag); b.bytes > grpcLoopHeaderList {
		return errGRPCLoopProtocol("a header block over " + strconv.Itoa(grpcLoopHeaderList) + " bytes")
	}
	if _, err := cc.dec.Write(frag); err != nil {
		return errGRPCLoopProtocol("a header block that does not decode: " + err.Error())
	}
	if !last {
		return nil
	}
	if err := cc.dec.Close(); err != nil {
		return errGRPCLoopProtocol("a header block that does not decode: " + err.Error())
	}
	b.open = false
	if b.call != nil {
		cc.headers(b.call)
	}
	*b = grpcLoopBlock{}
	return nil
}

// onField is the decoder's emit function: it keeps the fields of the
// answer being read.
func (cc *grpcLoopConn) onField(f hpack.HeaderField) {
	b := &cc.block
	if b.listSize += int(f.Size()); b.listSize > grpcLoopHeaderList {
		b.tooLarge = true
		cc.dec.SetEmitEnabled(false)
		return
	}
	switch f.Name {
	case ":status":
		b.status = f.Value
	case "grpc-status":
		b.grpcStatus = f.Value
	case "grpc-message":
		b.grpcMessage = f.Value
	default:
		if b.md != nil && !strings.HasPrefix(f.Name, ":") {
			b.md[f.Name] = append(b.md[f.Name], f.Value)
		}
	}
}

// grpcLoopBlock is the header block being read and what it said.
type grpcLoopBlock struct {
	open      bool
	stream    uint32
	endStream bool
	call      *grpcLoopCall // nil when nobody waits for it
	bytes     int           // the block's encoded size so far
	listSize  int           // its decoded size so far
	tooLarge  bool

	status, grpcStatus, grpcMessage string
	md                              metadata.MD
}

// headers takes a call's header block: the answer's, then its trailers
// (or both at once: trailers-only).
func (cc *grpcLoopConn) headers(call *grpcLoopCall) {
	b := &cc.block
	if b.tooLarge {
		cc.reset(call)
		cc.end(call, codes.Internal, "the backend's header list is over "+strconv.Itoa(grpcLoopHeaderList)+" bytes")
		return
	}
	if !call.headers {
		call.headers = true
		call.status, _ = strconv.Atoi(b.status)
		if !b.endStream {
			call.header = b.md
			if call.status != 200 {
				cc.end(call, httpToGRPC(call.status), "the backend answered HTTP "+b.status)
			}
			return
		}
	}
	if !b.endStream {
		cc.end(call, codes.Internal, "the backend sent a second header block before its trailers")
		return
	}
	call.trailer = b.md
	if b.grpcStatus == "" {
		code := codes.Internal
		if call.status != 200 {
			code = httpToGRPC(call.status)
		}
		cc.end(call, code, "the backend's answer has no grpc-status")
		return
	}
	n, err := strconv.Atoi(b.grpcStatus)
	if err != nil || n < 0 {
		n = int(codes.Unknown)
	}
	msg := b.grpcMessage
	if msg != "" {
		msg, _ = url.PathUnescape(msg)
	}
	cc.end(call, codes.Code(n), msg)
	if n == 0 {
		cc.unframe(call)
	}
}

// data takes a DATA frame for its call, within the call's bound, and owes
// the backend the window it took.
func (cc *grpcLoopConn) data(stream uint32, flags http2.Flags, p []byte) error {
	length := uint32(len(p))
	cc.unacked += int64(length)
	if cc.unacked >= grpcLoopConnWindow/2 {
		cc.owe.connWindow += uint32(cc.unacked)
		cc.unacked = 0
	}
	data, ok := h2frame.Unpad(flags, p)
	if !ok {
		return errGRPCLoopPadding
	}
	call := cc.calls[stream]
	if call == nil || call.done {
		return nil
	}
	if len(call.body)+len(data) > call.limit {
		cc.reset(call)
		cc.end(call, codes.ResourceExhausted, "the backend's reply is larger than max_response_bytes")
		return nil
	}
	call.body = append(call.body, data...)
	call.recvd += length
	ended := flags&http2.FlagDataEndStream != 0
	if call.recvd >= grpcLoopStreamWindow/2 && !ended {
		cc.owe.streams = append(cc.owe.streams, streamWindow{call.id, call.recvd})
		call.recvd = 0
	}
	if ended {
		cc.end(call, codes.Internal, "the backend ended the stream without trailers")
	}
	return nil
}

// unframe takes the one message out of an OK call's body.
func (cc *grpcLoopConn) unframe(call *grpcLoopCall) {
	b := call.body
	switch {
	case len(b) == 0:
		return // an empty reply: a message of no bytes, sent as no frame
	case len(b) < 5:
		call.code, call.message = codes.Internal, "the backend's reply is cut short"
	case b[0] != 0:
		call.code, call.message = codes.Internal, "the backend compressed its reply, which was not offered"
	case int(binary.BigEndian.Uint32(b[1:5])) != len(b)-5:
		call.code, call.message = codes.Internal, "the backend's reply is not one message"
	default:
		call.body = b[5:]
		return
	}
	call.body = nil
}

// end closes a call with a status and wakes its fiber.
func (cc *grpcLoopConn) end(call *grpcLoopCall, code codes.Code, msg string) {
	if call.done {
		return
	}
	call.done, call.code, call.message = true, code, msg
	if call.waiting {
		call.q.WakeOne()
	}
}

// fail marks the connection dead and wakes every call on it.
func (cc *grpcLoopConn) fail(err error) {
	if cc.err == nil {
		cc.err = err
	}
	cc.close()
	for _, call := range cc.calls {
		if call.waiting {
			call.q.WakeOne()
		}
	}
	for cc.slots.WakeOne() {
	}
}

// httpToGRPC maps a backend's HTTP status to a gRPC code (gRPC's HTTP
// mapping).
func httpToGRPC(status int) codes.Code {
	switch status {
	case 400:
		return codes.Internal
	case 401:
		return codes.Unauthenticated
	case 403:
		return codes.PermissionDenied
	case 404:
		return codes.Unimplemented
	case 429, 502, 503, 504:
		return codes.Unavailable
	}
	return codes.Unknown
}
