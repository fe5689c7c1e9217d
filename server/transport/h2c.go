package transport

import (
	"encoding/binary"
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

// h2cRefusal is what a client opening with the preface gets when h2c is
// off: the server's preface (an empty SETTINGS frame) then a GOAWAY with
// HTTP_1_1_REQUIRED, the code HTTP/2 has for "use HTTP/1.1 instead", and
// a reason an operator reading the client's error understands. An h2
// client shows the GOAWAY's code and text; an HTTP/1.1 answer would only
// read as a malformed frame to it.
var h2cRefusal = func() []byte {
	const reason = "h2c (HTTP/2 without TLS) is off on this listener: client.h2c"
	b := make([]byte, 0, 9+9+8+len(reason))
	b = append(b, 0, 0, 0, 0x4, 0, 0, 0, 0, 0) // SETTINGS, empty, stream 0
	b = binary.BigEndian.AppendUint32(b, uint32(8+len(reason))<<8|0x7)
	b = append(b, 0, 0, 0, 0, 0)              // flags, stream 0
	b = binary.BigEndian.AppendUint32(b, 0)   // last stream ID
	b = binary.BigEndian.AppendUint32(b, 0xd) // HTTP_1_1_REQUIRED
	return append(b, reason...)
}()

// H2CRefusal is the bytes that refuse an h2c client (h2cRefusal).
func H2CRefusal() []byte { return h2cRefusal }

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
