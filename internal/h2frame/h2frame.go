// Package h2frame writes and unpads HTTP/2 frames (RFC 9113 §4, §6) for
// the code that frames them itself into a buffer it writes in one go:
// the gateway's gRPC calls on the event loops, and the bench's lean gRPC
// backend. Frame types, flags, settings and error codes are x/net's.
package h2frame

import (
	"encoding/binary"

	"golang.org/x/net/http2"
)

// AppendHeader appends a frame's nine-byte header.
func AppendHeader(dst []byte, length int, typ http2.FrameType, flags http2.Flags, stream uint32) []byte {
	return append(dst, byte(length>>16), byte(length>>8), byte(length), byte(typ), byte(flags),
		byte(stream>>24&0x7f), byte(stream>>16), byte(stream>>8), byte(stream))
}

// ReadHeader reads a frame's nine-byte header from b.
func ReadHeader(b []byte) (length int, typ http2.FrameType, flags http2.Flags, stream uint32) {
	return int(b[0])<<16 | int(b[1])<<8 | int(b[2]), http2.FrameType(b[3]), http2.Flags(b[4]),
		binary.BigEndian.Uint32(b[5:]) & 0x7fffffff
}

// AppendSetting appends one setting of a SETTINGS frame's payload.
func AppendSetting(dst []byte, id http2.SettingID, v uint32) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(dst, uint16(id)), v)
}

// AppendWindowUpdate appends a WINDOW_UPDATE of n for stream (0: the
// connection).
func AppendWindowUpdate(dst []byte, stream, n uint32) []byte {
	dst = AppendHeader(dst, 4, http2.FrameWindowUpdate, 0, stream)
	return binary.BigEndian.AppendUint32(dst, n&0x7fffffff)
}

// AppendRSTStream appends a RST_STREAM of stream with code.
func AppendRSTStream(dst []byte, stream uint32, code http2.ErrCode) []byte {
	dst = AppendHeader(dst, 4, http2.FrameRSTStream, 0, stream)
	return binary.BigEndian.AppendUint32(dst, uint32(code))
}

// AppendGoAway appends a GOAWAY naming the last stream processed.
func AppendGoAway(dst []byte, last uint32, code http2.ErrCode) []byte {
	dst = AppendHeader(dst, 8, http2.FrameGoAway, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, last)
	return binary.BigEndian.AppendUint32(dst, uint32(code))
}

// Unpad takes a DATA or HEADERS frame's padding off its payload; ok is
// false when the padding is longer than the frame (a protocol error).
func Unpad(flags http2.Flags, p []byte) (_ []byte, ok bool) {
	if flags&http2.FlagDataPadded == 0 {
		return p, true
	}
	if len(p) == 0 || int(p[0]) >= len(p) {
		return nil, false
	}
	return p[1 : len(p)-int(p[0])], true
}
