package gatewaytest

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// H2Conn is an HTTP/2 client speaking frames, for what a well-behaved
// client never sends. Framer is there for frames of a test's own.
type H2Conn struct {
	tb     testing.TB
	Conn   net.Conn // TLS, or cleartext for h2c
	Framer *http2.Framer
	enc    *hpack.Encoder
	hbuf   bytes.Buffer
	next   uint32
}

// DialH2 opens an h2 connection for a.test, sends the preface and its
// SETTINGS frame with settings, and closes it when the test ends.
func (e *TLSEdge) DialH2(tb testing.TB, settings ...http2.Setting) *H2Conn {
	tb.Helper()
	conn, err := tls.Dial("tcp", e.Addr, &tls.Config{ServerName: "a.test", RootCAs: e.CA.Pool(), NextProtos: []string{"h2"}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		tb.Fatalf("ALPN chose %q", p)
	}
	return startH2Conn(tb, conn, settings)
}

// DialH2C opens an h2 connection to addr over cleartext (prior
// knowledge), sends the preface and its SETTINGS frame with settings, and
// closes it when the test ends.
func DialH2C(tb testing.TB, addr string, settings ...http2.Setting) *H2Conn {
	tb.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return startH2Conn(tb, conn, settings)
}

func startH2Conn(tb testing.TB, conn net.Conn, settings []http2.Setting) *H2Conn {
	tb.Helper()
	r := &H2Conn{tb: tb, Conn: conn, next: 1}
	r.Framer = http2.NewFramer(conn, bufio.NewReader(conn))
	r.Framer.ReadMetaHeaders = hpack.NewDecoder(65536, nil)
	r.enc = hpack.NewEncoder(&r.hbuf)
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		tb.Fatal(err)
	}
	if err := r.Framer.WriteSettings(settings...); err != nil {
		tb.Fatal(err)
	}
	return r
}

// Block encodes fields (name, value pairs) as a header block.
func (r *H2Conn) Block(fields ...string) []byte {
	r.hbuf.Reset()
	for i := 0; i+1 < len(fields); i += 2 {
		_ = r.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return slices.Clone(r.hbuf.Bytes())
}

// Next takes the id of the next stream, for a test writing its frames
// itself.
func (r *H2Conn) Next() uint32 {
	id := r.next
	r.next += 2
	return id
}

// Send opens a stream with fields and an optional body; it returns the id.
func (r *H2Conn) Send(body []byte, fields ...string) uint32 {
	id := r.next
	r.next += 2
	err := r.Framer.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.Block(fields...),
		EndHeaders: true, EndStream: body == nil})
	if err == nil && body != nil {
		err = r.Framer.WriteData(id, true, body)
	}
	if err != nil {
		r.tb.Fatal(err)
	}
	return id
}

// H2Outcome is how the gateway ended a stream: its answer's status, or
// the code of the RST_STREAM or GOAWAY that ended it.
type H2Outcome struct {
	Status string
	Reset  http2.ErrCode
	GoAway bool
	Body   []byte
}

// Await reads frames until stream id is answered or reset.
func (r *H2Conn) Await(id uint32) H2Outcome {
	r.tb.Helper()
	_ = r.Conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var o H2Outcome
	for {
		f, err := r.Framer.ReadFrame()
		if err != nil {
			r.tb.Fatalf("stream %d: %v", id, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = r.Framer.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID == id {
				o.Status = f.PseudoValue("status")
				if f.StreamEnded() {
					return o
				}
			}
		case *http2.DataFrame:
			if f.StreamID == id {
				o.Body = append(o.Body, f.Data()...)
				if f.StreamEnded() {
					return o
				}
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				o.Reset = f.ErrCode
				return o
			}
		case *http2.GoAwayFrame:
			o.GoAway, o.Reset = true, f.ErrCode
			return o
		}
	}
}

// H2Get is the fields of a GET of path for a.test, then extra.
func H2Get(path string, extra ...string) []string {
	return append([]string{":method", "GET", ":scheme", "https", ":authority", "a.test", ":path", path}, extra...)
}
