package server_test

import (
	"bufio"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/server"
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
	// held is the answer kept as read (pipeline.Ctx.Answer), as the
	// reactor lends it; parsed measures the path that reads the answer
	// into the fasthttp.Response instead.
	held   codec.Answer
	parsed bool
	id     int // the loop's ID
	ctx    *pipeline.Ctx
}

// context readies the context the loop keeps for its requests, as the
// reactor readies its own: the loop, and the answer kept as read unless
// parsed is measured. It is released once the answer is written.
func (l *memLoop) context(req *fasthttp.Request, resp *fasthttp.Response, peer netip.AddrPort) *pipeline.Ctx {
	if l.ctx == nil {
		l.ctx = pipeline.NewOwned()
	}
	c := l.ctx
	c.Req, c.Resp, c.Peer, c.Loop = req, resp, peer, l
	if !l.parsed {
		c.Answer = &l.held
	}
	return c
}

func (l *memLoop) Now() time.Time { return l.now }

func (*memLoop) Sleep(*pipeline.Ctx, time.Duration)                {}
func (*memLoop) Block(_ *pipeline.Ctx, call pipeline.BlockingCall) { call.Run() }
func (l *memLoop) ID() int                                         { return l.id }
func (*memLoop) Park(*pipeline.ParkQueue, time.Duration) bool      { return false }
func (*memLoop) Yield()                                            {}
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

// proxyPath is one proxied keep-alive GET on an event loop, from the
// client's bytes to the answer's, with the upstream in memory (memLoop).
type proxyPath struct {
	gw   *server.Gateway
	loop *memLoop
	peer netip.AddrPort
	raw  string // the client's request
	in   *strings.Reader
	br   *bufio.Reader
	bw   *bufio.Writer
	req  fasthttp.Request
	resp fasthttp.Response
	held int // answers written as read
}

const proxyPathRequest = "GET /api/order/list?page=2 HTTP/1.1\r\nHost: api.example.com\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n"

// browserRequest is proxyPathRequest as a browser sends it: the fields
// every one of them is checked against the framing, hop-by-hop, gateway-
// owned and internal names and the route's policy before it is forwarded.
const browserRequest = "GET /api/order/list?page=2 HTTP/1.1\r\nHost: api.example.com\r\n" +
	"User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0\r\n" +
	"Accept: application/json, text/plain, */*\r\nAccept-Language: en-US,en;q=0.5\r\n" +
	"Accept-Encoding: gzip, deflate, br, zstd\r\nReferer: https://shop.example.com/orders\r\n" +
	"Origin: https://shop.example.com\r\nConnection: keep-alive\r\n" +
	"Cookie: session=2b7e151628aed2a6abf7158809cf4f3c; theme=dark\r\nSec-Fetch-Dest: empty\r\n" +
	"Sec-Fetch-Mode: cors\r\nSec-Fetch-Site: same-site\r\nPriority: u=0\r\n\r\n"

// lateConnectionRequest names in Connection a field sent before it: the
// forwarding step reads the header section a second time.
const lateConnectionRequest = "GET /api/order/list HTTP/1.1\r\nHost: api.example.com\r\nX-Hop: 1\r\n" +
	"Connection: keep-alive, X-Hop\r\nAccept: */*\r\n\r\n"

func newProxyPath(tb testing.TB) *proxyPath { return newProxyPathFor(tb, proxyPathRequest) }

func newProxyPathFor(tb testing.TB, raw string) *proxyPath {
	tb.Helper()
	return newProxyPathOn(oneServiceGateway(tb, "10.0.0.1:80"), raw)
}

// newProxyPathOn is a proxyPath of its own (loop, connection, buffers) on
// an existing gateway.
func newProxyPathOn(gw *server.Gateway, raw string) *proxyPath {
	p := &proxyPath{
		raw: raw,
		gw:  gw,
		loop: &memLoop{now: time.Now(), answer: []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 64\r\n" +
			"Date: Tue, 01 Dec 2026 14:00:00 GMT\r\n\r\n" + strings.Repeat("x", 64))},
		peer: netip.MustParseAddrPort("127.0.0.1:40000"),
		in:   strings.NewReader(raw),
		bw:   bufio.NewWriterSize(io.Discard, 4096),
	}
	p.br = bufio.NewReaderSize(p.in, 4096)
	return p
}

// serve runs the request once; it reports the answer's status.
func (p *proxyPath) serve() int {
	p.in.Reset(p.raw)
	p.br.Reset(p.in)
	if err := p.req.Header.Read(p.br); err != nil {
		return -1
	}
	p.resp.Header.SetNoDefaultContentType(true)
	c := p.loop.context(&p.req, &p.resp, p.peer)
	p.gw.Serve(c)
	st := p.resp.StatusCode()
	if a := &p.loop.held; a.Active() {
		p.held++
		_ = a.Write(p.bw, p.resp.Body(), false, false, false)
		a.Reset()
	} else {
		_ = p.resp.Write(p.bw)
	}
	_ = p.bw.Flush()
	pipeline.Release(c)
	p.req.Reset()
	p.resp.Reset()
	return st
}

// BenchmarkProxyPath is the gateway's Go work for one proxied keep-alive
// GET on an event loop: what the gateway adds to the syscalls every proxy
// pays.
//
// The answer's header section is passed on as read (codec.Answer), as on
// a route no filter of which sees the answer; the "parsed" runs read it
// into the fasthttp.Response and write it out again, as on the others.
func BenchmarkProxyPath(b *testing.B) {
	b.Run("wrk", func(b *testing.B) { benchmarkProxyPath(b, proxyPathRequest, false) })
	b.Run("browser", func(b *testing.B) { benchmarkProxyPath(b, browserRequest, false) })
	b.Run("wrk parsed", func(b *testing.B) { benchmarkProxyPath(b, proxyPathRequest, true) })
	b.Run("browser parsed", func(b *testing.B) { benchmarkProxyPath(b, browserRequest, true) })
}

// BenchmarkProxyPathTwoLoops is BenchmarkProxyPath/wrk on two loops at
// once (run it with -cpu 2): one gateway, each loop with its own
// connections. Its ns/op is wall time for two cores; twice it is the Go
// work per request, to set beside BenchmarkProxyPath's. Whatever the loops
// share and write moves cache lines between the cores and shows here.
func BenchmarkProxyPathTwoLoops(b *testing.B) {
	gw := newProxyPath(b).gw
	var loops atomic.Int64
	b.ReportAllocs()
	b.ResetTimer() // the gateway's building is not the requests' cost
	b.SetParallelism(1)
	b.RunParallel(func(pb *testing.PB) {
		p := newProxyPathOn(gw, proxyPathRequest)
		p.loop.id = int(loops.Add(1) - 1)
		for pb.Next() {
			if st := p.serve(); st != 200 {
				b.Errorf("status %d", st)
				return
			}
		}
	})
}

func benchmarkProxyPath(b *testing.B, raw string, parsed bool) {
	p := newProxyPathFor(b, raw)
	p.loop.parsed = parsed
	b.ReportAllocs()
	for b.Loop() {
		if st := p.serve(); st != 200 {
			b.Fatalf("status %d", st)
		}
	}
}
