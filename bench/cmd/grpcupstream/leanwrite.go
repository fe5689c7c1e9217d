package main

import (
	"encoding/binary"
	"strconv"

	"github.com/tollgate/tollgate/internal/h2frame"
	"github.com/tollgate/tollgate/internal/hpackenc"
	"golang.org/x/net/http2"
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
		flags := http2.Flags(0)
		lc.bw.Write(h2frame.AppendHeader(lc.enc.scratch[:0], n, http2.FrameData, flags, st.id))
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
	typ := http2.FrameHeaders
	for first := true; first || len(blk) > 0; first = false {
		chunk := blk[:min(len(blk), lc.maxFrame)]
		blk = blk[len(chunk):]
		var flags http2.Flags
		if first && endStream {
			flags |= http2.FlagDataEndStream
		}
		if len(blk) == 0 {
			flags |= http2.FlagHeadersEndHeaders
		}
		lc.bw.Write(h2frame.AppendHeader(lc.enc.scratch[:0], len(chunk), typ, flags, id))
		lc.bw.Write(chunk)
		typ = http2.FrameContinuation
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
func (lc *leanConn) settings(flags http2.Flags, id uint32, p []byte) error {
	if id != 0 {
		return protocolError("SETTINGS on a stream")
	}
	if flags&http2.FlagSettingsAck != 0 {
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
		switch http2.SettingID(binary.BigEndian.Uint16(p)) {
		case http2.SettingHeaderTableSize:
			lc.enc.table.SetLimit(v)
		case http2.SettingInitialWindowSize:
			if v > 1<<31-1 {
				return errLeanProtocol{http2.ErrCodeFlowControl, "an initial window past 2^31-1"}
			}
			delta := int64(v) - lc.initWin
			lc.initWin = int64(v)
			for _, st := range lc.streams {
				st.win += delta
			}
		case http2.SettingMaxFrameSize:
			if v < 16384 || v > 1<<24-1 {
				return protocolError("a max frame size out of range")
			}
			lc.maxFrame = int(min(v, 1<<20))
		}
	}
	lc.bw.Write(h2frame.AppendHeader(lc.enc.scratch[:0], 0, http2.FrameSettings, http2.FlagSettingsAck, 0))
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
	dst = h2frame.AppendHeader(dst, 12, http2.FrameSettings, 0, 0)
	dst = h2frame.AppendSetting(dst, http2.SettingMaxConcurrentStreams, leanMaxStreams)
	return h2frame.AppendSetting(dst, http2.SettingMaxHeaderListSize, leanHeaderList)
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
