package transport

import (
	"encoding/binary"
	"io"
	"net"
)

// ClientPreface is how an HTTP/2 connection opens (RFC 9113, 3.4). On a
// cleartext listener it is the only sign of a client that speaks h2 with
// prior knowledge (h2c: gRPC clients, h2c load balancers).
const ClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// PrefaceMatch tells what the first bytes b of a connection say: a
// complete preface (h2), a start of one that needs more bytes (more), or
// neither (an HTTP/1.x request, or garbage the HTTP/1 parser refuses).
func PrefaceMatch(b []byte) (h2, more bool) {
	n := min(len(b), len(ClientPreface))
	if string(b[:n]) != ClientPreface[:n] {
		return false, false
	}
	return n == len(ClientPreface), n < len(ClientPreface)
}

// Bounds of what RefuseH2C reads of a refused client's frames, looking for
// its first request: HTTP/2's default largest frame, and a few of them.
const (
	refusalFrameBytes = 16 << 10
	refusalReadBytes  = 64 << 10
)

const (
	frameHeaders       = 0x1
	frameRSTStream     = 0x3
	frameSettings      = 0x4
	frameGoAway        = 0x7
	codeHTTP11Required = 0xd
	h2cRefusalReason   = "h2c (HTTP/2 without TLS) is off on this listener: client.h2c"
)

// RefuseH2C refuses a client that opened with the preface (r reads what
// follows it) when h2c is off. It sends the server's preface (an empty
// SETTINGS frame: gRPC clients send no request before it), reads the
// client's frames, bounded, up to its first request, and ends that
// stream with RST_STREAM HTTP_1_1_REQUIRED, then the connection with a
// GOAWAY carrying the same code and the reason. The code is HTTP/2's "use
// HTTP/1.1 instead": a gRPC call fails at once with it instead of
// waiting, curl stops showing it (newer versions ask again over
// HTTP/1.1); an HTTP/1.1 answer would only read as a malformed frame to
// either.
func RefuseH2C(r io.Reader, write func([]byte) error) error {
	if err := write(appendFrame(nil, frameSettings, 0, nil)); err != nil {
		return err
	}
	var hdr [9]byte
	var stream uint32
	for read := 0; read < refusalReadBytes && stream == 0; {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			break
		}
		n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		if n > refusalFrameBytes {
			break
		}
		if id := binary.BigEndian.Uint32(hdr[5:]) & 0x7fffffff; hdr[3] == frameHeaders && id != 0 {
			stream = id
		} else if _, err := io.CopyN(io.Discard, r, int64(n)); err != nil {
			break
		}
		read += len(hdr) + n
	}
	code := binary.BigEndian.AppendUint32(nil, codeHTTP11Required)
	var b []byte
	if stream != 0 {
		b = appendFrame(b, frameRSTStream, stream, code)
	}
	// The last stream is the refused one: answered, not to be retried on
	// a connection that would be refused the same way.
	goaway := append(binary.BigEndian.AppendUint32(nil, stream), code...)
	b = appendFrame(b, frameGoAway, 0, append(goaway, h2cRefusalReason...))
	return write(b)
}

func appendFrame(b []byte, typ byte, stream uint32, payload []byte) []byte {
	n := len(payload)
	b = append(b, byte(n>>16), byte(n>>8), byte(n), typ, 0)
	b = binary.BigEndian.AppendUint32(b, stream)
	return append(b, payload...)
}

// PrefacedConn is a connection whose first bytes were already read (to
// find the preface): its reads give those bytes first, then the socket's.
type PrefacedConn struct {
	net.Conn
	Read0 []byte
}

func (c *PrefacedConn) Read(p []byte) (int, error) {
	if len(c.Read0) > 0 {
		n := copy(p, c.Read0)
		c.Read0 = c.Read0[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
