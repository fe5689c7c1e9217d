package dubbo

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The Dubbo 2 frame header: 16 bytes, big-endian.
//
//	0-1   magic 0xdabb
//	2     flags: 0x80 request, 0x40 two-way, 0x20 event; low 5 bits the
//	      serialization id (2: hessian2)
//	3     status (answers only)
//	4-11  request id
//	12-15 body length
const (
	headerLen = 16
	magicHigh = 0xda
	magicLow  = 0xbb

	flagRequest = 0x80
	flagTwoWay  = 0x40
	flagEvent   = 0x20
	serialMask  = 0x1f

	serialHessian2 = 2
)

// Answer statuses (byte 3).
const (
	StatusOK              = 20
	StatusClientTimeout   = 30
	StatusServerTimeout   = 31
	StatusBadRequest      = 40
	StatusBadResponse     = 50
	StatusServiceNotFound = 60
	StatusServiceError    = 70
	StatusServerError     = 80
	StatusClientError     = 90
	StatusThreadpoolFull  = 100
)

// header is a decoded frame header.
type header struct {
	flags  byte
	status byte
	id     uint64
	length int
}

func (h header) request() bool { return h.flags&flagRequest != 0 }
func (h header) event() bool   { return h.flags&flagEvent != 0 }
func (h header) twoWay() bool  { return h.flags&flagTwoWay != 0 }

var errBadMagic = errors.New("dubbo: not a Dubbo frame (bad magic)")

// parseHeader decodes a frame header, refusing bodies over maxBody: the
// length is the peer's word and is checked before anything is allocated.
func parseHeader(b []byte, maxBody int) (header, error) {
	if b[0] != magicHigh || b[1] != magicLow {
		return header{}, errBadMagic
	}
	h := header{flags: b[2], status: b[3], id: binary.BigEndian.Uint64(b[4:12])}
	n := int32(binary.BigEndian.Uint32(b[12:16]))
	if n < 0 || int(n) > maxBody {
		return header{}, fmt.Errorf("dubbo: frame body of %d bytes exceeds the limit of %d", n, maxBody)
	}
	if !h.event() && h.flags&serialMask != serialHessian2 {
		return header{}, fmt.Errorf("dubbo: serialization %d not supported (only hessian2)", h.flags&serialMask)
	}
	h.length = int(n)
	return h, nil
}

// appendHeader starts a frame in dst; finishFrame writes the body length
// once the body follows it.
func appendHeader(dst []byte, flags, status byte, id uint64) []byte {
	dst = append(dst, magicHigh, magicLow, flags|serialHessian2, status)
	dst = binary.BigEndian.AppendUint64(dst, id)
	return append(dst, 0, 0, 0, 0)
}

// finishFrame writes the length of the body after the header that starts
// at start.
func finishFrame(frame []byte, start int) {
	binary.BigEndian.PutUint32(frame[start+12:start+16], uint32(len(frame)-start-headerLen))
}
