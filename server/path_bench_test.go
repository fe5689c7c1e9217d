package server

import (
	"bufio"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

// memLoop is an event loop whose upstream connections are in memory: each
// request written to one is answered at once with a fixed response. It
// lets a benchmark measure the gateway's own Go work per proxied request
// — the client's parse, checks, routing, the upstream head, the exchange's
// writing and parsing, the answer's serialization — with no syscall and
// no scheduler in it.
type memLoop struct {
	answer []byte
	now    time.Time // the loop's clock, as a real loop caches it per batch
}

func (l *memLoop) Now() time.Time { return l.now }

func (*memLoop) Sleep(*pipeline.Ctx, time.Duration)           {}
func (*memLoop) Blocking(*pipeline.Ctx, bool)                 {}
func (*memLoop) ID() int                                      { return 0 }
func (*memLoop) Park(*pipeline.ParkQueue, time.Duration) bool { return false }
func (l *memLoop) Dial(string, time.Duration) (net.Conn, error) {
	return &memConn{answer: l.answer}, nil
}

// memConn answers every request (a write ending its header section, the
// bench's requests have no body) with answer.
type memConn struct {
	answer []byte
	unread []byte // of answer
}

func (c *memConn) Write(p []byte) (int, error) {
	if len(p) >= 4 && string(p[len(p)-4:]) == "\r\n\r\n" {
		c.unread = c.answer
	}
	return len(p), nil
}

func (c *memConn) Read(p []byte) (int, error) {
	if len(c.unread) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.unread)
	c.unread = c.unread[n:]
	return n, nil
}

func (c *memConn) Close() error                     { return nil }
func (c *memConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }

// BenchmarkProxyPath is the gateway's Go work for one proxied keep-alive
// GET on an event loop, from the client's bytes to the answer's, with the
// upstream in memory (see memLoop): what the gateway adds to the syscalls
// every proxy pays.
func BenchmarkProxyPath(b *testing.B) {
	f, err := config.Parse("b", []byte(oneService), func(string) (string, bool) { return "10.0.0.1:80", true })
	if err != nil {
		b.Fatal(err)
	}
	f.Defaults()
	snap, err := config.NewCompiler().Compile(f, "b")
	if err != nil {
		b.Fatal(err)
	}
	gw := NewGateway(snap, nil)
	loop := &memLoop{now: time.Now(), answer: []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 64\r\nDate: Tue, 01 Dec 2026 14:00:00 GMT\r\n\r\n" +
		strings.Repeat("x", 64))}
	peer := netip.MustParseAddrPort("127.0.0.1:40000")
	raw := "GET /api/order/list?page=2 HTTP/1.1\r\nHost: api.example.com\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n"
	in := strings.NewReader(raw)
	br := bufio.NewReaderSize(in, 4096)
	bw := bufio.NewWriterSize(io.Discard, 4096)
	var req fasthttp.Request
	var resp fasthttp.Response
	b.ReportAllocs()
	for b.Loop() {
		in.Reset(raw)
		br.Reset(in)
		if err := req.Header.Read(br); err != nil {
			b.Fatal(err)
		}
		resp.Header.SetNoDefaultContentType(true)
		gw.ServeOn(&req, &resp, peer, loop)
		if resp.StatusCode() != 200 {
			b.Fatalf("status %d: %s", resp.StatusCode(), resp.Body())
		}
		_ = resp.Write(bw)
		_ = bw.Flush()
		req.Reset()
		resp.Reset()
	}
}
