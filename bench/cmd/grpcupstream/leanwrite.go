package main

import (
	"encoding/binary"
	"strconv"

	"github.com/tollgate/tollgate/internal/hpackenc"
	"golang.org/x/net/http2"
)

// HTTP/2 frame types, flags and settings (RFC 9113 §6).
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	framePushPromise  = 0x5
	framePing         = 0x6
	frameGoAway       = 0x7
	frameWindowUpdate = 0x8
	frameContinuation = 0x9

	flagEndStream  = 0x1
	flagAck        = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20

	settingHeaderTableSize   = 0x1
	settingMaxConcurrent     = 0x3
	settingInitialWindowSize = 0x4
	settingMaxFrameSize      = 0x5
	settingMaxHeaderListSize = 0x6
)

// leanEncoder writes a connection's header blocks through its client's
// HPACK table; blocks are encoded as they are written, in order.
type leanEncoder struct {
	table   hpackenc.Table
	hbuf    []byte // a header block
	num     []byte // a grpc-status value
	msg     []byte // a grpc-message value, percent-encoded
	scratch []byte // a control frame
}

var (
	grpcStatusName  = []byte("grpc-status")
	grpcMessageName = []byte("grpc-message")
)

// answer writes the call's answer: a trailers-only one for a status, else
// the header block, the reply (as far as the client's windows allow; the
// rest when they open) and the trailers.
func (lc *leanConn) answer(st *leanStream, call orderCall) {
	e := &lc.enc
	blk := e.table.BeginBlock(e.hbuf[:0])
	blk = hpackenc.AppendStatus(blk, 200)
	blk = e.table.AppendField(blk, "content-type", "application/grpc")
	if call.code != codeOK {
		e.num = strconv.AppendInt(e.num[:0], int64(call.code), 10)
		blk = e.table.AppendVaryingField(blk, grpcStatusName, e.num)
		if call.message != "" {
			e.msg = percentEncode(e.msg[:0], call.message)
			blk = e.table.AppendVaryingField(blk, grpcMessageName, e.msg)
		}
		if call.trace != "" {
			blk = e.table.AppendField(blk, "x-order-trace", call.trace)
		}
		e.hbuf = blk
		lc.writeBlock(st.id, blk, true)
		lc.finish(st)
		return
	}
	e.hbuf = blk
	lc.writeBlock(st.id, blk, false)
	st.out = append(st.out[:0], 0)
	st.out = binary.BigEndian.AppendUint32(st.out, uint32(len(call.reply)))
	st.out = append(st.out, call.reply...)
	st.trace = call.trace
	if !lc.send(st) {
		lc.held = append(lc.held, st)
	}
}

// send writes what the windows allow of the stream's held answer, and
// its trailers once all of it went.
func (lc *leanConn) send(st *leanStream) bool {
	for len(st.out) > 0 {
		n := int(min(int64(len(st.out)), int64(lc.maxFrame), lc.connWin, st.win))
		if n <= 0 {
			return false
		}
		flags := byte(0)
		lc.bw.Write(appendFrameHeader(lc.enc.scratch[:0], n, frameData, flags, st.id))
		lc.bw.Write(st.out[:n])
		lc.connWin -= int64(n)
		st.win -= int64(n)
		st.out = st.out[:copy(st.out, st.out[n:])]
	}
	e := &lc.enc
	blk := e.table.BeginBlock(e.hbuf[:0])
	blk = e.table.AppendField(blk, "grpc-status", "0")
	if st.trace != "" {
		blk = e.table.AppendField(blk, "x-order-trace", st.trace)
	}
	e.hbuf = blk
	lc.writeBlock(st.id, blk, true)
	lc.finish(st)
	return true
}

// sendHeld goes on with the answers that waited for window.
func (lc *leanConn) sendHeld() {
	kept := lc.held[:0]
	for _, st := range lc.held {
		if !st.done && !lc.send(st) {
			kept = append(kept, st)
		}
	}
	clear(lc.held[len(kept):])
	lc.held = kept
}

// writeBlock writes a header block as HEADERS and CONTINUATION frames.
func (lc *leanConn) writeBlock(id uint32, blk []byte, endStream bool) {
	typ := byte(frameHeaders)
	for first := true; first || len(blk) > 0; first = false {
		chunk := blk[:min(len(blk), lc.maxFrame)]
		blk = blk[len(chunk):]
		var flags byte
		if first && endStream {
			flags |= flagEndStream
		}
		if len(blk) == 0 {
			flags |= flagEndHeaders
		}
		lc.bw.Write(appendFrameHeader(lc.enc.scratch[:0], len(chunk), typ, flags, id))
		lc.bw.Write(chunk)
		typ = frameContinuation
	}
}

// windowUpdate opens a window and sends what waited for it.
func (lc *leanConn) windowUpdate(id uint32, p []byte) error {
	if len(p) != 4 {
		return errLeanProtocol{http2.ErrCodeFrameSize, "a malformed WINDOW_UPDATE"}
	}
	inc := int64(binary.BigEndian.Uint32(p) & 0x7fffffff)
	if inc == 0 {
		return protocolError("a WINDOW_UPDATE of 0")
	}
	if id == 0 {
		if lc.connWin += inc; lc.connWin > 1<<31-1 {
			return errLeanProtocol{http2.ErrCodeFlowControl, "the connection window past 2^31-1"}
		}
	} else if st := lc.streams[id]; st != nil {
		if st.win += inc; st.win > 1<<31-1 {
			return errLeanProtocol{http2.ErrCodeFlowControl, "a stream window past 2^31-1"}
		}
		if len(st.out) > 0 && !inHeld(lc.held, st) {
			lc.held = append(lc.held, st)
		}
	}
	lc.sendHeld()
	return nil
}

func inHeld(held []*leanStream, st *leanStream) bool {
	for _, h := range held {
		if h == st {
			return true
		}
	}
	return false
}

// settings applies the client's settings and acknowledges them.
func (lc *leanConn) settings(flags byte, id uint32, p []byte) error {
	if id != 0 {
		return protocolError("SETTINGS on a stream")
	}
	if flags&flagAck != 0 {
		if len(p) != 0 {
			return errLeanProtocol{http2.ErrCodeFrameSize, "a SETTINGS acknowledgement with a payload"}
		}
		return nil
	}
	if len(p)%6 != 0 {
		return errLeanProtocol{http2.ErrCodeFrameSize, "a SETTINGS payload not of six-byte settings"}
	}
	for ; len(p) > 0; p = p[6:] {
		v := binary.BigEndian.Uint32(p[2:])
		switch binary.BigEndian.Uint16(p) {
		case settingHeaderTableSize:
			lc.enc.table.SetLimit(v)
		case settingInitialWindowSize:
			if v > 1<<31-1 {
				return errLeanProtocol{http2.ErrCodeFlowControl, "an initial window past 2^31-1"}
			}
			delta := int64(v) - lc.initWin
			lc.initWin = int64(v)
			for _, st := range lc.streams {
				st.win += delta
			}
		case settingMaxFrameSize:
			if v < 16384 || v > 1<<24-1 {
				return protocolError("a max frame size out of range")
			}
			lc.maxFrame = int(min(v, 1<<20))
		}
	}
	lc.bw.Write(appendFrameHeader(lc.enc.scratch[:0], 0, frameSettings, flagAck, 0))
	for _, st := range lc.streams {
		if len(st.out) > 0 && !inHeld(lc.held, st) {
			lc.held = append(lc.held, st)
		}
	}
	lc.sendHeld()
	return nil
}

// appendSettings is the engine's SETTINGS frame.
func appendSettings(dst []byte) []byte {
	dst = appendFrameHeader(dst, 12, frameSettings, 0, 0)
	for _, s := range [...][2]uint32{{settingMaxConcurrent, leanMaxStreams}, {settingMaxHeaderListSize, leanHeaderList}} {
		dst = binary.BigEndian.AppendUint16(dst, uint16(s[0]))
		dst = binary.BigEndian.AppendUint32(dst, s[1])
	}
	return dst
}

func appendFrameHeader(dst []byte, length int, typ, flags byte, id uint32) []byte {
	return append(dst, byte(length>>16), byte(length>>8), byte(length), typ, flags,
		byte(id>>24&0x7f), byte(id>>16), byte(id>>8), byte(id))
}

func appendWindowUpdate(dst []byte, id, n uint32) []byte {
	dst = appendFrameHeader(dst, 4, frameWindowUpdate, 0, id)
	return binary.BigEndian.AppendUint32(dst, n)
}

func appendRST(dst []byte, id uint32, code http2.ErrCode) []byte {
	dst = appendFrameHeader(dst, 4, frameRSTStream, 0, id)
	return binary.BigEndian.AppendUint32(dst, uint32(code))
}

func appendGoAway(dst []byte, last uint32, code http2.ErrCode) []byte {
	dst = appendFrameHeader(dst, 8, frameGoAway, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, last)
	return binary.BigEndian.AppendUint32(dst, uint32(code))
}

// unpad takes a padded frame's padding off.
func unpad(flags byte, p []byte) ([]byte, error) {
	if flags&flagPadded == 0 {
		return p, nil
	}
	if len(p) == 0 || int(p[0]) >= len(p) {
		return nil, protocolError("padding longer than its frame")
	}
	return p[1 : len(p)-int(p[0])], nil
}

// percentEncode writes a grpc-message value as gRPC asks: bytes outside
// printable ASCII, and '%', as %XX.
func percentEncode(dst []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '%' {
			dst = append(dst, '%', hex[c>>4], hex[c&15])
			continue
		}
		dst = append(dst, c)
	}
	return dst
}
