package upstream

import (
	"encoding/binary"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

// grpcLoopFrameTime bounds reading the rest of a frame once its header
// came: a backend that stops mid-frame has broken the connection.
const grpcLoopFrameTime = 5 * time.Second

// readFor reads frames for the calls of the connection until call is
// done, its deadline passes or the connection fails, then passes the
// reading to another call still waiting.
func (cc *grpcLoopConn) readFor(call *grpcLoopCall, deadline time.Time) {
	cc.reading = true
	defer func() {
		cc.reading = false
		cc.passReading()
	}()
	for !call.done && cc.err == nil {
		// Waiting for a frame to begin is bounded by this call's
		// deadline and consumes nothing: another call may take over.
		_ = cc.conn.SetReadDeadline(deadline)
		if _, err := cc.br.Peek(9); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return
			}
			cc.fail(err)
			return
		}
		_ = cc.conn.SetReadDeadline(time.Now().Add(grpcLoopFrameTime))
		f, err := cc.fr.ReadFrame()
		if err != nil {
			cc.fail(err)
			return
		}
		cc.dispatch(f)
		cc.flushOwed()
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

// dispatch hands a frame to its call, or applies it to the connection.
func (cc *grpcLoopConn) dispatch(f http2.Frame) {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			return
		}
		_ = f.ForeachSetting(func(s http2.Setting) error {
			switch s.ID {
			case http2.SettingMaxConcurrentStreams:
				cc.maxCalls = int(min(s.Val, 10000))
			case http2.SettingInitialWindowSize:
				cc.peerWin = int64(s.Val)
			case http2.SettingMaxFrameSize:
				cc.maxFrame = int(min(s.Val, 1<<20))
			}
			return nil
		})
		cc.owe.settingsAck = true
		for range cc.maxCalls - len(cc.calls) {
			if !cc.slots.WakeOne() {
				break
			}
		}
	case *http2.PingFrame:
		if !f.IsAck() && len(cc.owe.pings) < 16 {
			cc.owe.pings = append(cc.owe.pings, f.Data)
		}
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			cc.sendWin = min(cc.sendWin+int64(f.Increment), 1<<31-1)
		}
	case *http2.GoAwayFrame:
		cc.goAway = true
		for id, call := range cc.calls {
			if id > f.LastStreamID {
				cc.end(call, codes.Unavailable, "the backend is closing the connection (GOAWAY)")
			}
		}
	case *http2.RSTStreamFrame:
		if call := cc.calls[f.StreamID]; call != nil {
			code := codes.Internal
			switch f.ErrCode {
			case http2.ErrCodeRefusedStream:
				code = codes.Unavailable
			case http2.ErrCodeCancel:
				code = codes.Canceled
			case http2.ErrCodeEnhanceYourCalm:
				code = codes.ResourceExhausted
			}
			cc.end(call, code, "stream reset by the backend: "+f.ErrCode.String())
		}
	case *http2.MetaHeadersFrame:
		if call := cc.calls[f.StreamID]; call != nil {
			cc.headers(call, f)
		}
	case *http2.DataFrame:
		cc.data(f)
	}
}

// headers takes a call's HEADERS: the answer's, then its trailers (or
// both at once: trailers-only).
func (cc *grpcLoopConn) headers(call *grpcLoopCall, f *http2.MetaHeadersFrame) {
	var md metadata.MD
	if call.metadata {
		md = metadata.MD{}
	}
	var status, grpcStatus, grpcMessage string
	for _, h := range f.Fields {
		switch h.Name {
		case ":status":
			status = h.Value
		case "grpc-status":
			grpcStatus = h.Value
		case "grpc-message":
			grpcMessage = h.Value
		default:
			if md != nil && !strings.HasPrefix(h.Name, ":") {
				md[h.Name] = append(md[h.Name], h.Value)
			}
		}
	}
	if !call.headers {
		call.headers = true
		call.status, _ = strconv.Atoi(status)
		if !f.StreamEnded() {
			call.header = md
			if call.status != 200 {
				cc.end(call, httpToGRPC(call.status), "the backend answered HTTP "+status)
			}
			return
		}
	}
	if !f.StreamEnded() {
		cc.end(call, codes.Internal, "the backend sent a second header block before its trailers")
		return
	}
	call.trailer = md
	if grpcStatus == "" {
		code := codes.Internal
		if call.status != 200 {
			code = httpToGRPC(call.status)
		}
		cc.end(call, code, "the backend's answer has no grpc-status")
		return
	}
	n, err := strconv.Atoi(grpcStatus)
	if err != nil || n < 0 {
		n = int(codes.Unknown)
	}
	msg, _ := url.PathUnescape(grpcMessage)
	cc.end(call, codes.Code(n), msg)
	if n == 0 {
		cc.unframe(call)
	}
}

// data takes a DATA frame for its call, within the call's bound, and owes
// the backend the window it took.
func (cc *grpcLoopConn) data(f *http2.DataFrame) {
	n := uint32(len(f.Data()))
	cc.unacked += int64(f.Length)
	if cc.unacked >= grpcLoopConnWindow/2 {
		cc.owe.connWindow += uint32(cc.unacked)
		cc.unacked = 0
	}
	call := cc.calls[f.StreamID]
	if call == nil || call.done {
		return
	}
	if len(call.body)+int(n) > call.limit {
		cc.owe.resets = append(cc.owe.resets, call.id)
		cc.end(call, codes.ResourceExhausted, "the backend's reply is larger than max_response_bytes")
		return
	}
	call.body = append(call.body, f.Data()...)
	call.recvd += f.Length
	if call.recvd >= grpcLoopStreamWindow/2 && !f.StreamEnded() {
		cc.owe.streams = append(cc.owe.streams, streamWindow{call.id, call.recvd})
		call.recvd = 0
	}
	if f.StreamEnded() {
		cc.end(call, codes.Internal, "the backend ended the stream without trailers")
	}
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
	for cc.writers.WakeOne() {
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
