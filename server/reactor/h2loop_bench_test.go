package reactor_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/server"
	"github.com/tollgate/tollgate/server/h2"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// okHandler answers every request 200 "ok" from memory: what is measured
// is the transport's work per stream.
type okHandler struct{}

func (okHandler) Serve(c *pipeline.Ctx) bool {
	c.Resp.Header.SetContentType("text/plain")
	c.Resp.SetBodyString("ok")
	return false
}

func (okHandler) ServeError(_ error, c *pipeline.Ctx) { c.Resp.SetStatusCode(400) }

// rawH2 is a client that makes no allocation per request: the request's
// HEADERS frame is made once, as a client's encoder makes it once its
// fields are in the dynamic table (the first request puts them there), and
// answers are read as frame headers and skipped.
type rawH2 struct {
	conn  net.Conn
	br    *bufio.Reader
	frame []byte // HEADERS, END_STREAM|END_HEADERS; its stream id patched per request
	buf   []byte
	next  uint32
	taken uint32 // DATA bytes not yet given back to the connection's window
}

func dialRawH2(tb testing.TB, addr string) *rawH2 {
	tb.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	var blk bytes.Buffer
	enc := hpack.NewEncoder(&blk)
	block := func() []byte {
		blk.Reset()
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "a.test"}, {":path", "/bench"}, {"user-agent", "bench"}} {
			_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		frame := make([]byte, 9, 9+blk.Len())
		frame[0], frame[1], frame[2] = byte(blk.Len()>>16), byte(blk.Len()>>8), byte(blk.Len())
		frame[3], frame[4] = byte(http2.FrameHeaders), byte(http2.FlagHeadersEndStream|http2.FlagHeadersEndHeaders)
		return append(frame, blk.Bytes()...)
	}
	r := &rawH2{conn: conn, br: bufio.NewReaderSize(conn, 64<<10), frame: block(), buf: make([]byte, 64<<10), next: 1}
	if _, err := io.WriteString(conn, http2.ClientPreface+"\x00\x00\x00\x04\x00\x00\x00\x00\x00"); err != nil {
		tb.Fatal(err)
	}
	r.roundTrip(tb)   // the fields enter both sides' tables
	r.frame = block() // from now on all indexed
	return r
}

// roundTrip sends one request and reads frames until its stream ends.
func (r *rawH2) roundTrip(tb testing.TB) {
	id := r.next
	r.next += 2
	binary.BigEndian.PutUint32(r.frame[5:9], id)
	if _, err := r.conn.Write(r.frame); err != nil {
		tb.Fatal(err)
	}
	for {
		hdr := r.buf[:9]
		if _, err := io.ReadFull(r.br, hdr); err != nil {
			tb.Fatal(err)
		}
		n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		typ, flags, sid := http2.FrameType(hdr[3]), http2.Flags(hdr[4]), binary.BigEndian.Uint32(hdr[5:9])&0x7fffffff
		if _, err := io.ReadFull(r.br, r.buf[:n]); err != nil {
			tb.Fatal(err)
		}
		switch typ {
		case http2.FrameSettings:
			if flags&http2.FlagSettingsAck == 0 {
				_, _ = r.conn.Write([]byte{0, 0, 0, 4, 1, 0, 0, 0, 0})
			}
		case http2.FrameGoAway, http2.FrameRSTStream:
			tb.Fatalf("frame %v on stream %d", typ, sid)
		case http2.FrameData:
			if r.taken += uint32(n); r.taken > 1<<15 {
				var wu [13]byte
				wu[2], wu[3] = 4, byte(http2.FrameWindowUpdate)
				binary.BigEndian.PutUint32(wu[9:], r.taken)
				_, _ = r.conn.Write(wu[:])
				r.taken = 0
			}
		}
		if sid == id && flags&http2.FlagDataEndStream != 0 && (typ == http2.FrameData || typ == http2.FrameHeaders) {
			return
		}
	}
}

// BenchmarkH2LoopStream: one stream served over h2c on the loops, from
// its HEADERS to its answer's END_STREAM; allocs/op are the gateway's
// (the client makes none).
func BenchmarkH2LoopStream(b *testing.B) {
	o := server.Options{HTTP2: h2.New(h2.Options{}), IdleTimeout: time.Minute, HeaderTimeout: time.Minute}
	_, addr := newTransportKind(b, "reactor", okHandler{}, o)
	r := dialRawH2(b, addr)
	for range 1000 { // warm: fibers, pools, the encoder's table
		r.roundTrip(b)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		r.roundTrip(b)
	}
}
