package reactor_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/server"
	"github.com/tollgate/tollgate/server/reactor"
	"github.com/valyala/fasthttp"
)

// npStub answers 200 with "METHOD TARGET" (plus " n=<len> crc=<crc32>" when
// the request has a body) and counts calls. A target starting with /slow
// sleeps first; /noread leaves the body unread; /close asks to close.
type npStub struct {
	calls    atomic.Int64
	errs     atomic.Int64
	slow     time.Duration
	started  chan struct{} // if set, gets a value when a /slow request starts
	lastPeer atomic.Pointer[netip.AddrPort]
	lastErr  atomic.Pointer[error] // last body read error
}

func (s *npStub) Serve(c *pipeline.Ctx) bool {
	req, resp, peer := c.Req, c.Resp, c.Peer
	s.calls.Add(1)
	s.lastPeer.Store(&peer)
	target := req.Header.RequestURI()
	if bytes.HasPrefix(target, []byte("/slow")) {
		if s.started != nil {
			s.started <- struct{}{}
		}
		time.Sleep(s.slow)
	}
	resp.SetStatusCode(fasthttp.StatusOK)
	resp.AppendBody(req.Header.Method())
	resp.AppendBodyString(" ")
	resp.AppendBody(target)
	if !bytes.HasPrefix(target, []byte("/noread")) {
		var n int
		var sum uint32
		if req.IsBodyStream() {
			h := crc32.NewIEEE()
			m, err := io.Copy(h, req.BodyStream())
			if err != nil {
				s.lastErr.Store(&err)
				if bytes.HasPrefix(target, []byte("/ignore")) {
					// A careless handler: answers as if all were fine.
					return false
				}
				resp.SetStatusCode(codec.Status(err))
				return true
			}
			n, sum = int(m), h.Sum32()
		} else if b := req.Body(); len(b) > 0 {
			n, sum = len(b), crc32.ChecksumIEEE(b)
		}
		if n > 0 {
			resp.AppendBodyString(fmt.Sprintf(" n=%d crc=%08x", n, sum))
		}
	}
	return bytes.HasPrefix(target, []byte("/close"))
}

func (s *npStub) ServeError(err error, c *pipeline.Ctx) {
	s.errs.Add(1)
	c.Resp.SetStatusCode(codec.Status(err))
	c.Resp.SetBodyString(codec.Message(err))
}

func npOptions() server.Options {
	return server.Options{
		MaxHeaderBytes:  4096,
		MaxURIBytes:     1024,
		StreamBodyBytes: 64 << 10,
		HeaderTimeout:   2 * time.Second,
		BodyTimeout:     2 * time.Second,
		IdleTimeout:     5 * time.Second,
		WriteTimeout:    2 * time.Second,
		MaxConns:        1000,
		IOUring:         npIOUring,
	}
}

// npIOUring is the io_uring option the reactor's tests run with: "auto"
// (socket calls in batches where the kernel allows it), or "off" (one
// syscall each; see TestNetpollSyscallsOneByOne).
var npIOUring = "auto"

// npServe starts a netpoll transport on 127.0.0.1:0 until the test ends.
func npServe(tb testing.TB, h server.Handler, o server.Options) (server.Transport, string) {
	tb.Helper()
	tr, err := reactor.New(h, o)
	if err != nil {
		tb.Fatal(err)
	}
	return tr, gatewaytest.Serve(tb, tr)
}

// npStart starts a netpoll transport on 127.0.0.1:0 for a test that shuts
// it down itself; served reports what Serve returned.
func npStart(tb testing.TB, h server.Handler, o server.Options) (tr server.Transport, addr string, served <-chan error) {
	tb.Helper()
	tr, err := reactor.New(h, o)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tr.Serve(ln) }()
	return tr, ln.Addr().String(), done
}

func TestNetpollKeepAlive(t *testing.T) {
	h := &npStub{}
	tr, addr := npServe(t, h, npOptions())
	conn := gatewaytest.Dial(t, addr)
	br := bufio.NewReader(conn)
	for i := range 5 {
		gatewaytest.Write(t, conn, fmt.Sprintf("GET /ka/%d HTTP/1.1\r\nHost: x\r\n\r\n", i))
		resp := gatewaytest.ReadAnswer(t, conn, br, false)
		gatewaytest.Check(t, resp, 200, fmt.Sprintf("GET /ka/%d", i))
		if resp.ConnectionClose() {
			t.Fatal("keep-alive answer has Connection: close")
		}
	}
	if got := h.calls.Load(); got != 5 {
		t.Fatalf("handler calls = %d, want 5", got)
	}
	if got := tr.Conns(); got != 1 {
		t.Fatalf("Conns() = %d, want 1", got)
	}
	if got, want := *h.lastPeer.Load(), conn.LocalAddr().(*net.TCPAddr).AddrPort(); got != want {
		t.Fatalf("peer %v, want %v", got, want)
	}
	// The wire header: one Date, no Server, no default Content-Type.
	gatewaytest.Write(t, conn, "GET /raw HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var raw strings.Builder
	for !strings.HasSuffix(raw.String(), "\r\n\r\n") {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		raw.WriteString(line)
	}
	if _, err := io.ReadFull(br, make([]byte, len("GET /raw"))); err != nil {
		t.Fatal(err)
	}
	hdr := raw.String()
	if n := strings.Count(hdr, "\r\nDate: "); n != 1 {
		t.Fatalf("want one Date header, got %d in %q", n, hdr)
	}
	if strings.Contains(hdr, "\r\nServer:") || strings.Contains(hdr, "\r\nContent-Type:") {
		t.Fatalf("unexpected default header in %q", hdr)
	}
	// A HEAD answer carries no body and the connection stays usable.
	gatewaytest.Write(t, conn, "HEAD /h HTTP/1.1\r\nHost: x\r\n\r\nGET /after-head HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp := gatewaytest.ReadAnswer(t, conn, br, true); resp.StatusCode() != 200 {
		t.Fatalf("HEAD status %d", resp.StatusCode())
	}
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200, "GET /after-head")
	conn.Close()
	testutil.Eventually(t, 2*time.Second, "Conns() to drop to 0", func() bool { return tr.Conns() == 0 })
}

func TestNetpollPipelining(t *testing.T) {
	h := &npStub{}
	_, addr := npServe(t, h, npOptions())
	conn := gatewaytest.Dial(t, addr)
	br := bufio.NewReader(conn)
	gatewaytest.Write(t, conn, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\n"+
		"GET /2 HTTP/1.1\r\nHost: x\r\n\r\n"+
		"POST /3 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"+
		"GET /4 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200, "GET /1")
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200, "GET /2")
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200, fmt.Sprintf("POST /3 n=5 crc=%08x", crc32.ChecksumIEEE([]byte("hello"))))
	last := gatewaytest.ReadAnswer(t, conn, br, false)
	gatewaytest.Check(t, last, 200, "GET /4")
	if !last.ConnectionClose() {
		t.Fatal("last answer lacks Connection: close")
	}
	gatewaytest.ExpectClosed(t, conn, br, 2*time.Second)
}

// Many pipelined requests: answers are batched and flushed, none is lost.
func TestNetpollPipeliningMany(t *testing.T) {
	h := &npStub{}
	_, addr := npServe(t, h, npOptions())
	conn := gatewaytest.Dial(t, addr)
	br := bufio.NewReader(conn)
	var sb strings.Builder
	const n = 300
	for i := range n {
		fmt.Fprintf(&sb, "GET /p/%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
	}
	go func() { _, _ = conn.Write([]byte(sb.String())) }()
	for i := range n {
		gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200, fmt.Sprintf("GET /p/%d", i))
	}
}

func TestNetpollSplitRequest(t *testing.T) {
	h := &npStub{}
	_, addr := npServe(t, h, npOptions())
	conn := gatewaytest.Dial(t, addr)
	br := bufio.NewReader(conn)
	parts := []string{"PO", "ST /split HTTP/1.1\r\nHo", "st: x\r\nContent-Le", "ngth: 11\r\n\r", "\nhello", " world"}
	for _, p := range parts {
		gatewaytest.Write(t, conn, p)
		time.Sleep(30 * time.Millisecond)
	}
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200,
		fmt.Sprintf("POST /split n=11 crc=%08x", crc32.ChecksumIEEE([]byte("hello world"))))
	// The connection is still good.
	gatewaytest.Write(t, conn, "GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200, "GET /next")
}

// A pipelined answer is sent even though the next request is incomplete.
func TestNetpollPipelinedAnswerNotHeldByPartialRequest(t *testing.T) {
	h := &npStub{}
	_, addr := npServe(t, h, npOptions())
	conn := gatewaytest.Dial(t, addr)
	br := bufio.NewReader(conn)
	gatewaytest.Write(t, conn, "GET /first HTTP/1.1\r\nHost: x\r\n\r\nGET /sec")
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200, "GET /first")
	gatewaytest.Write(t, conn, "ond HTTP/1.1\r\nHost: x\r\n\r\n")
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200, "GET /second")
}

func npPayload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

func TestNetpollLargeBodyStreamed(t *testing.T) {
	h := &npStub{}
	_, addr := npServe(t, h, npOptions())
	conn := gatewaytest.Dial(t, addr)
	br := bufio.NewReader(conn)
	body := npPayload(200 << 10)
	go func() {
		_, _ = fmt.Fprintf(conn, "POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", len(body))
		for b := body; len(b) > 0; {
			n := min(len(b), 16<<10)
			_, _ = conn.Write(b[:n])
			b = b[n:]
		}
		_, _ = conn.Write([]byte("GET /after HTTP/1.1\r\nHost: x\r\n\r\n"))
	}()
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200, fmt.Sprintf("POST /big n=%d crc=%08x", len(body), crc32.ChecksumIEEE(body)))
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200, "GET /after")
}

func TestNetpollChunkedBody(t *testing.T) {
	h := &npStub{}
	_, addr := npServe(t, h, npOptions())
	conn := gatewaytest.Dial(t, addr)
	br := bufio.NewReader(conn)
	gatewaytest.Write(t, conn, "POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"5\r\nhello\r\n")
	time.Sleep(20 * time.Millisecond)
	gatewaytest.Write(t, conn, "6\r\n world\r\n0\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n")
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200,
		fmt.Sprintf("POST /chunked n=11 crc=%08x", crc32.ChecksumIEEE([]byte("hello world"))))
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200, "GET /after")
}

// A streamed body the handler does not read is drained when small and the
// connection kept; what follows the body is parsed as the next request, and
// bytes inside the body never are.
func TestNetpollUnreadBodyDrained(t *testing.T) {
	h := &npStub{}
	_, addr := npServe(t, h, npOptions())
	smuggled := "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			conn := gatewaytest.Dial(t, addr)
			br := bufio.NewReader(conn)
			body := append([]byte(smuggled), npPayload(100<<10)...)
			go func() {
				if chunked {
					_, _ = fmt.Fprintf(conn, "POST /noread HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(body), body)
				} else {
					_, _ = fmt.Fprintf(conn, "POST /noread HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
				}
				_, _ = conn.Write([]byte("GET /next HTTP/1.1\r\nHost: x\r\n\r\n"))
			}()
			gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200, "POST /noread")
			gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200, "GET /next")
		})
	}
	// Too large to drain: the answer says close, and the connection closes.
	conn := gatewaytest.Dial(t, addr)
	br := bufio.NewReader(conn)
	body := npPayload(2 << 20)
	go func() {
		_, _ = fmt.Fprintf(conn, "POST /noread HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", len(body))
		_, _ = conn.Write(body)
	}()
	resp := gatewaytest.ReadAnswer(t, conn, br, false)
	gatewaytest.Check(t, resp, 200, "POST /noread")
	if !resp.ConnectionClose() {
		t.Fatal("answer after an undrainable body lacks Connection: close")
	}
}

// A small chunked body is decoded whole before the handler runs, so a
// malformed one is refused with 400 and never reaches the handler.
func TestNetpollMalformedChunkedRefused(t *testing.T) {
	h := &npStub{}
	_, addr := npServe(t, h, npOptions())
	cases := map[string]string{
		"bad hex":        "zz\r\nabc\r\n0\r\n\r\n",
		"overflow":       "ffffffffffffffffff\r\nabc\r\n0\r\n\r\n",
		"no CRLF":        "3\r\nabcX0\r\n\r\n",
		"bare LF size":   "3\nabc\r\n0\r\n\r\n",
		"empty size":     "\r\nabc\r\n0\r\n\r\n",
		"ctl in ext":     "3;a=\x01\r\nabc\r\n0\r\n\r\n",
		"junk after hex": "3 x\r\nabc\r\n0\r\n\r\n",
		"bad trailer":    "3\r\nabc\r\n0\r\nno colon\r\n\r\n",
		"folded trailer": "3\r\nabc\r\n0\r\nX-T: a\r\n b\r\n\r\n",
	}
	for name, chunks := range cases {
		t.Run(name, func(t *testing.T) {
			before := h.calls.Load()
			conn := gatewaytest.Dial(t, addr)
			br := bufio.NewReader(conn)
			gatewaytest.Write(t, conn, "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"+chunks+
				"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
			resp := gatewaytest.ReadAnswer(t, conn, br, false)
			if resp.StatusCode() != 400 || !resp.ConnectionClose() {
				t.Fatalf("got %d close=%v, want 400 and close", resp.StatusCode(), resp.ConnectionClose())
			}
			gatewaytest.ExpectClosed(t, conn, br, 2*time.Second)
			if h.calls.Load() != before {
				t.Fatal("the handler saw a malformed request")
			}
		})
	}
	// Extensions and trailers are accepted (and trailers dropped).
	conn := gatewaytest.Dial(t, addr)
	br := bufio.NewReader(conn)
	gatewaytest.Write(t, conn, "POST /ext HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"5 ;name=\"v\"\r\nhello\r\n0\r\nX-Sum: 1\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n")
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200, fmt.Sprintf("POST /ext n=5 crc=%08x", crc32.ChecksumIEEE([]byte("hello"))))
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200, "GET /next")
}

// A streamed chunked body that breaks its framing mid-way is never
// resynchronised into a next request, even when the handler ignores the
// read error.
func TestNetpollBrokenStreamedChunkCloses(t *testing.T) {
	for _, target := range []string{"/chunk", "/ignore-error"} {
		t.Run(target, func(t *testing.T) {
			h := &npStub{}
			o := npOptions()
			o.StreamBodyBytes = 1024
			_, addr := npServe(t, h, o)
			conn := gatewaytest.Dial(t, addr)
			br := bufio.NewReader(conn)
			gatewaytest.Write(t, conn, "POST "+target+" HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"+
				fmt.Sprintf("%x\r\n%s\r\n", 4000, npPayload(4000))+
				"5\r\nhelloXX0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
			resp := gatewaytest.ReadAnswer(t, conn, br, false)
			if !resp.ConnectionClose() {
				t.Fatalf("got %d without Connection: close", resp.StatusCode())
			}
			gatewaytest.ExpectClosed(t, conn, br, 2*time.Second)
			if n := h.calls.Load(); n != 1 {
				t.Fatalf("handler called %d times, want 1", n)
			}
		})
	}
}

func TestNetpollBodyLimit(t *testing.T) {
	h := &npStub{}
	o := npOptions()
	o.MaxBodyBytes = 1000
	o.StreamBodyBytes = 100
	_, addr := npServe(t, h, o)

	// A declared length over the limit: 413 at once, no 100 Continue,
	// nothing read.
	conn := gatewaytest.Dial(t, addr)
	br := bufio.NewReader(conn)
	gatewaytest.Write(t, conn, "POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\nExpect: 100-continue\r\n\r\n")
	resp := gatewaytest.ReadAnswer(t, conn, br, false)
	if resp.StatusCode() != 413 || !resp.ConnectionClose() {
		t.Fatalf("got %d close=%v, want 413 and close", resp.StatusCode(), resp.ConnectionClose())
	}
	gatewaytest.ExpectClosed(t, conn, br, 2*time.Second)

	// A streamed chunked body over the limit: the handler's read fails with
	// an error the upstream answers 413, and the connection closes.
	conn = gatewaytest.Dial(t, addr)
	br = bufio.NewReader(conn)
	gatewaytest.Write(t, conn, "POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"+
		strings.Repeat("64\r\n"+strings.Repeat("x", 100)+"\r\n", 12)+"0\r\n\r\n")
	resp = gatewaytest.ReadAnswer(t, conn, br, false)
	if resp.StatusCode() != 413 || !resp.ConnectionClose() {
		t.Fatalf("got %d close=%v, want 413 and close", resp.StatusCode(), resp.ConnectionClose())
	}
	if err := h.lastErr.Load(); err == nil || !errors.Is(*err, codec.ErrBodyTooLarge) {
		t.Fatalf("stream error %v, want one matching codec.ErrBodyTooLarge", err)
	}

	// Within the limit both ways, streamed or not.
	for _, n := range []int{50, 1000} {
		conn = gatewaytest.Dial(t, addr)
		br = bufio.NewReader(conn)
		body := npPayload(n)
		gatewaytest.Write(t, conn, fmt.Sprintf("POST /cl HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", n, body))
		gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200, fmt.Sprintf("POST /cl n=%d crc=%08x", n, crc32.ChecksumIEEE(body)))
		gatewaytest.Write(t, conn, fmt.Sprintf("POST /te HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", n, body))
		gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200, fmt.Sprintf("POST /te n=%d crc=%08x", n, crc32.ChecksumIEEE(body)))
	}
}

func TestNetpollExpectContinue(t *testing.T) {
	h := &npStub{}
	_, addr := npServe(t, h, npOptions())
	conn := gatewaytest.Dial(t, addr)
	br := bufio.NewReader(conn)
	gatewaytest.Write(t, conn, "POST /expect HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	line, err := br.ReadString('\n')
	if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("got %q, %v", line, err)
	}
	if blank, _ := br.ReadString('\n'); blank != "\r\n" {
		t.Fatalf("got %q after 100 Continue", blank)
	}
	gatewaytest.Write(t, conn, "hello")
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200, fmt.Sprintf("POST /expect n=5 crc=%08x", crc32.ChecksumIEEE([]byte("hello"))))
}

func TestNetpollHTTP10(t *testing.T) {
	h := &npStub{}
	_, addr := npServe(t, h, npOptions())

	conn := gatewaytest.Dial(t, addr)
	br := bufio.NewReader(conn)
	gatewaytest.Write(t, conn, "GET /old HTTP/1.0\r\n\r\n")
	resp := gatewaytest.ReadAnswer(t, conn, br, false)
	gatewaytest.Check(t, resp, 200, "GET /old")
	if !resp.ConnectionClose() {
		t.Fatal("HTTP/1.0 answer lacks Connection: close")
	}
	gatewaytest.ExpectClosed(t, conn, br, 2*time.Second)

	conn = gatewaytest.Dial(t, addr)
	br = bufio.NewReader(conn)
	for i := range 3 {
		gatewaytest.Write(t, conn, fmt.Sprintf("GET /old/%d HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", i))
		resp := gatewaytest.ReadAnswer(t, conn, br, false)
		gatewaytest.Check(t, resp, 200, fmt.Sprintf("GET /old/%d", i))
		if got := string(resp.Header.Peek("Connection")); got != "keep-alive" {
			t.Fatalf("Connection = %q, want keep-alive", got)
		}
	}
}

func TestNetpollHandlerAsksClose(t *testing.T) {
	h := &npStub{}
	_, addr := npServe(t, h, npOptions())
	conn := gatewaytest.Dial(t, addr)
	br := bufio.NewReader(conn)
	gatewaytest.Write(t, conn, "GET /close HTTP/1.1\r\nHost: x\r\n\r\nGET /never HTTP/1.1\r\nHost: x\r\n\r\n")
	resp := gatewaytest.ReadAnswer(t, conn, br, false)
	gatewaytest.Check(t, resp, 200, "GET /close")
	if !resp.ConnectionClose() {
		t.Fatal("answer lacks Connection: close")
	}
	gatewaytest.ExpectClosed(t, conn, br, 2*time.Second)
	if n := h.calls.Load(); n != 1 {
		t.Fatalf("handler called %d times, want 1", n)
	}
}

func TestNetpollHeaderTooLarge(t *testing.T) {
	h := &npStub{}
	o := npOptions()
	o.MaxHeaderBytes, o.MaxURIBytes = 1024, 256
	_, addr := npServe(t, h, o)
	conn := gatewaytest.Dial(t, addr)
	br := bufio.NewReader(conn)
	gatewaytest.Write(t, conn, "GET /big-header HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("b", 4000)+"\r\n\r\n")
	resp := gatewaytest.ReadAnswer(t, conn, br, false)
	if resp.StatusCode() != fasthttp.StatusRequestHeaderFieldsTooLarge || !resp.ConnectionClose() {
		t.Fatalf("got %d close=%v, want 431 and close", resp.StatusCode(), resp.ConnectionClose())
	}
	gatewaytest.ExpectClosed(t, conn, br, 2*time.Second)
	if h.calls.Load() != 0 || h.errs.Load() != 1 {
		t.Fatalf("calls=%d errors=%d, want 0 and 1", h.calls.Load(), h.errs.Load())
	}
}

func TestNetpollMalformedRequest(t *testing.T) {
	h := &npStub{}
	_, addr := npServe(t, h, npOptions())
	conn := gatewaytest.Dial(t, addr)
	br := bufio.NewReader(conn)
	gatewaytest.Write(t, conn, "GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
	resp := gatewaytest.ReadAnswer(t, conn, br, false)
	if resp.StatusCode() != 400 || !resp.ConnectionClose() {
		t.Fatalf("got %d close=%v, want 400 and close", resp.StatusCode(), resp.ConnectionClose())
	}
	gatewaytest.ExpectClosed(t, conn, br, 2*time.Second)
}

func TestNetpollSlowlorisCutAtHeaderTimeout(t *testing.T) {
	h := &npStub{}
	o := npOptions()
	o.HeaderTimeout = 300 * time.Millisecond
	_, addr := npServe(t, h, o)
	conn := gatewaytest.Dial(t, addr)
	br := bufio.NewReader(conn)
	stop := make(chan struct{})
	defer close(stop)
	start := time.Now()
	go func() {
		header := "GET /slow HTTP/1.1\r\nHost: x\r\nX-A: " + strings.Repeat("a", 200)
		for i := range len(header) {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := conn.Write([]byte{header[i]}); err != nil {
				return
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	resp := &fasthttp.Response{}
	err := resp.Read(br)
	if err == nil && resp.StatusCode() != fasthttp.StatusRequestTimeout {
		t.Fatalf("got %d, want 408 or a close", resp.StatusCode())
	}
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("slowloris connection not cut")
		}
	} else {
		gatewaytest.ExpectClosed(t, conn, br, 2*time.Second)
	}
	if took := time.Since(start); took < 250*time.Millisecond || took > 1500*time.Millisecond {
		t.Fatalf("cut after %v, want about 300ms", took)
	}
	if h.calls.Load() != 0 {
		t.Fatal("handler saw the partial request")
	}
}

func TestNetpollIdleTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out idle timeouts")
	}
	h := &npStub{}
	o := npOptions()
	o.IdleTimeout = 500 * time.Millisecond
	o.HeaderTimeout = 400 * time.Millisecond
	tr, addr := npServe(t, h, o)

	conn := gatewaytest.Dial(t, addr)
	br := bufio.NewReader(conn)
	gatewaytest.Write(t, conn, "GET /once HTTP/1.1\r\nHost: x\r\n\r\n")
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200, "GET /once")
	// Upper bounds leave room for a loaded CI machine; the point is that
	// the close comes from the idle timeout, not from TCP keep-alive.
	took := gatewaytest.ExpectClosed(t, conn, br, 5*time.Second)
	if took < 400*time.Millisecond || took > 3*time.Second {
		t.Fatalf("idle connection closed after %v, want about 500ms", took)
	}

	// A connection that never sends a request gets the header timeout.
	silent := gatewaytest.Dial(t, addr)
	took = gatewaytest.ExpectClosed(t, silent, bufio.NewReader(silent), 5*time.Second)
	if took < 300*time.Millisecond || took > 3*time.Second {
		t.Fatalf("silent connection closed after %v, want about 400ms", took)
	}

	// An active connection is not cut: requests every 200ms for 1.2s.
	active := gatewaytest.Dial(t, addr)
	abr := bufio.NewReader(active)
	for i := range 6 {
		gatewaytest.Write(t, active, "GET /busy HTTP/1.1\r\nHost: x\r\n\r\n")
		gatewaytest.Check(t, gatewaytest.ReadAnswer(t, active, abr, false), 200, "GET /busy")
		if i < 5 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	testutil.Eventually(t, 3*time.Second, "Conns() to drop to 0", func() bool { return tr.Conns() == 0 })
}

func TestNetpollMaxConns(t *testing.T) {
	h := &npStub{}
	o := npOptions()
	o.MaxConns = 2
	tr, addr := npServe(t, h, o)
	var kept []net.Conn
	var readers []*bufio.Reader
	for range 2 {
		c := gatewaytest.Dial(t, addr)
		br := bufio.NewReader(c)
		gatewaytest.Write(t, c, "GET /in HTTP/1.1\r\nHost: x\r\n\r\n")
		gatewaytest.Check(t, gatewaytest.ReadAnswer(t, c, br, false), 200, "GET /in")
		kept, readers = append(kept, c), append(readers, br)
	}
	if got := tr.Conns(); got != 2 {
		t.Fatalf("Conns() = %d, want 2", got)
	}
	extra := gatewaytest.Dial(t, addr)
	_, _ = extra.Write([]byte("GET /refused HTTP/1.1\r\nHost: x\r\n\r\n"))
	gatewaytest.ExpectClosed(t, extra, bufio.NewReader(extra), 2*time.Second)
	if got := tr.Conns(); got != 2 {
		t.Fatalf("Conns() = %d after refusal, want 2", got)
	}
	// Closing one frees a slot.
	kept[0].Close()
	testutil.Eventually(t, 2*time.Second, "a free slot", func() bool { return tr.Conns() == 1 })
	again := gatewaytest.Dial(t, addr)
	br := bufio.NewReader(again)
	gatewaytest.Write(t, again, "GET /again HTTP/1.1\r\nHost: x\r\n\r\n")
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, again, br, false), 200, "GET /again")
	gatewaytest.Write(t, kept[1], "GET /still HTTP/1.1\r\nHost: x\r\n\r\n")
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, kept[1], readers[1], false), 200, "GET /still")
	if n := h.calls.Load(); n != 4 {
		t.Fatalf("handler calls = %d, want 4", n)
	}
}

func TestNetpollShutdownLetsInFlightFinish(t *testing.T) {
	h := &npStub{slow: 400 * time.Millisecond, started: make(chan struct{}, 1)}
	tr, addr, served := npStart(t, h, npOptions())

	idle := gatewaytest.Dial(t, addr)
	ibr := bufio.NewReader(idle)
	gatewaytest.Write(t, idle, "GET /idle HTTP/1.1\r\nHost: x\r\n\r\n")
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, idle, ibr, false), 200, "GET /idle")

	busy := gatewaytest.Dial(t, addr)
	bbr := bufio.NewReader(busy)
	gatewaytest.Write(t, busy, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-h.started

	start := time.Now()
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		shut <- tr.Shutdown(ctx)
	}()
	// The idle connection is closed at once.
	if took := gatewaytest.ExpectClosed(t, idle, ibr, 3*time.Second); took > time.Second {
		t.Fatalf("idle connection closed after %v", took)
	}
	// The in-flight request is answered, with Connection: close.
	resp := gatewaytest.ReadAnswer(t, busy, bbr, false)
	gatewaytest.Check(t, resp, 200, "GET /slow")
	if !resp.ConnectionClose() {
		t.Fatal("in-flight answer lacks Connection: close")
	}
	gatewaytest.ExpectClosed(t, busy, bbr, 2*time.Second)
	select {
	case err := <-shut:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return")
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Fatalf("Shutdown returned after %v, before the in-flight request ended", took)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Serve did not return")
	}
	if c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond); err == nil {
		c.Close()
		t.Fatal("still accepting after Shutdown")
	}
	if got := tr.Conns(); got != 0 {
		t.Fatalf("Conns() = %d after Shutdown", got)
	}
}

func TestNetpollShutdownDeadline(t *testing.T) {
	h := &npStub{slow: 800 * time.Millisecond, started: make(chan struct{}, 1)}
	tr, addr := npServe(t, h, npOptions())
	busy := gatewaytest.Dial(t, addr)
	gatewaytest.Write(t, busy, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-h.started
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := tr.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want deadline exceeded", err)
	}
}

func TestNetpollShutdownBeforeServe(t *testing.T) {
	tr, err := reactor.New(&npStub{}, npOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Serve(ln); err != nil {
		t.Fatalf("Serve after Shutdown = %v, want nil", err)
	}
}

// Idle keep-alive connections hold no goroutine.
func TestNetpollIdleConnsHoldNoGoroutine(t *testing.T) {
	h := &npStub{}
	_, addr := npServe(t, h, npOptions())
	const n = 300
	// Let the pool's workers from earlier tests exit.
	time.Sleep(50 * time.Millisecond)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m0)
	before := runtime.NumGoroutine()
	conns := make([]net.Conn, 0, n)
	br := bufio.NewReader(nil) // one client reader, reused: only server state stays
	for i := range n {
		c := gatewaytest.Dial(t, addr)
		br.Reset(c)
		gatewaytest.Write(t, c, fmt.Sprintf("GET /i/%d HTTP/1.1\r\nHost: x\r\n\r\n", i))
		gatewaytest.Check(t, gatewaytest.ReadAnswer(t, c, br, false), 200, fmt.Sprintf("GET /i/%d", i))
		conns = append(conns, c)
	}
	time.Sleep(100 * time.Millisecond)
	after := runtime.NumGoroutine()
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	if after-before > 20 {
		t.Fatalf("%d idle connections hold %d goroutines", n, after-before)
	}
	perConn := (int64(m1.HeapAlloc) - int64(m0.HeapAlloc)) / n
	t.Logf("%d idle keep-alive connections: %d goroutines before, %d after; live heap +%d B per connection (client side included)",
		n, before, after, perConn)
	if perConn > 64<<10 {
		t.Fatalf("idle connections cost %d B each", perConn)
	}
	for _, c := range conns {
		c.Close()
	}
}

func TestNetpollConcurrentClients(t *testing.T) {
	h := &npStub{}
	tr, addr := npServe(t, h, npOptions())
	var wg sync.WaitGroup
	const clients, each = 16, 50
	errs := make(chan error, clients)
	for c := range clients {
		wg.Go(func() {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			br := bufio.NewReader(conn)
			for i := range each {
				body := fmt.Sprintf("c%d-%d", c, i)
				if _, err := fmt.Fprintf(conn, "POST /c/%d HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", i, len(body), body); err != nil {
					errs <- err
					return
				}
				_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
				var resp fasthttp.Response
				if err := resp.Read(br); err != nil {
					errs <- err
					return
				}
				want := fmt.Sprintf("POST /c/%d n=%d crc=%08x", i, len(body), crc32.ChecksumIEEE([]byte(body)))
				if string(resp.Body()) != want {
					errs <- fmt.Errorf("got %q want %q", resp.Body(), want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := h.calls.Load(); got != clients*each {
		t.Fatalf("calls = %d, want %d", got, clients*each)
	}
	testutil.Eventually(t, 2*time.Second, "Conns() to drop to 0", func() bool { return tr.Conns() == 0 })
}

// npReactorTests are the reactor's tests that TestNetpollDispatchMode and
// TestNetpollSyscallsOneByOne run again in another mode.
func npReactorTests() map[string]func(*testing.T) {
	return map[string]func(*testing.T){
		"KeepAlive": TestNetpollKeepAlive, "Pipelining": TestNetpollPipelining,
		"PipeliningMany": TestNetpollPipeliningMany, "SplitRequest": TestNetpollSplitRequest,
		"PartialRequest": TestNetpollPipelinedAnswerNotHeldByPartialRequest,
		"LargeBody":      TestNetpollLargeBodyStreamed, "Chunked": TestNetpollChunkedBody,
		"UnreadBody": TestNetpollUnreadBodyDrained, "MalformedChunked": TestNetpollMalformedChunkedRefused,
		"BrokenChunk": TestNetpollBrokenStreamedChunkCloses, "BodyLimit": TestNetpollBodyLimit,
		"ExpectContinue": TestNetpollExpectContinue, "HTTP10": TestNetpollHTTP10,
		"HandlerAsksClose": TestNetpollHandlerAsksClose, "HeaderTooLarge": TestNetpollHeaderTooLarge,
		"Malformed": TestNetpollMalformedRequest, "Slowloris": TestNetpollSlowlorisCutAtHeaderTimeout,
		"IdleTimeout": TestNetpollIdleTimeout, "MaxConns": TestNetpollMaxConns,
		"ShutdownInFlight": TestNetpollShutdownLetsInFlightFinish, "ShutdownDeadline": TestNetpollShutdownDeadline,
		"IdleNoGoroutine": TestNetpollIdleConnsHoldNoGoroutine, "Concurrent": TestNetpollConcurrentClients,
		"StreamingBounded": TestStreamingWhileBusyIsBounded, "ClaimedBody": TestClaimedBodySizeIsNotAllocated,
		"BareLF": TestBareLFHeaderSectionAnsweredAtOnce,
	}
}

// TestNetpollSyscallsOneByOne runs the reactor's tests again with the
// event loops making one syscall for each socket call (io_uring: off, and
// where the kernel refuses a ring); the others make them in batches where
// it allows one.
func TestNetpollSyscallsOneByOne(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the reactor tests again without io_uring")
	}
	npIOUring = "off"
	defer func() { npIOUring = "auto" }()
	for name, test := range npReactorTests() {
		t.Run(name, test)
	}
}

func TestNetpollNewTransport(t *testing.T) {
	tr, err := server.NewTransport("netpoll", &npStub{}, npOptions())
	if err != nil {
		t.Fatal(err)
	}
	addr := gatewaytest.Serve(t, tr)
	conn := gatewaytest.Dial(t, addr)
	br := bufio.NewReader(conn)
	gatewaytest.Write(t, conn, "GET /via-new HTTP/1.1\r\nHost: x\r\n\r\n")
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200, "GET /via-new")
}

// npBenchHandler answers a fixed body without allocating.
type npBenchHandler struct{}

var npBenchBody = []byte("hello, world")

func (npBenchHandler) Serve(c *pipeline.Ctx) bool {
	c.Resp.SetBodyRaw(npBenchBody)
	return false
}

func (npBenchHandler) ServeError(err error, c *pipeline.Ctx) {
	c.Resp.SetStatusCode(codec.Status(err))
}

var npBenchRequest = []byte("GET /api/order/list?page=2 HTTP/1.1\r\nHost: api.example.com\r\nUser-Agent: bench\r\nAccept: application/json\r\n\r\n")

// BenchmarkNetpollTransport does keep-alive GETs over loopback sockets.
// allocs/op counts the whole process: the transport, netpoll and the
// (allocation-free) client. The fasthttp-ref cases run the fasthttp.Server
// transport for comparison.
func BenchmarkNetpollTransport(b *testing.B) {
	o := npOptions()
	o.MaxConns = 0
	kinds := []struct {
		name string
		new  func() server.Transport
	}{
		{"netpoll", func() server.Transport {
			tr, err := reactor.New(npBenchHandler{}, o)
			if err != nil {
				b.Fatal(err)
			}
			return tr
		}},
		{"fasthttp-ref", func() server.Transport {
			tr, err := server.NewTransport("fasthttp", npBenchHandler{}, o)
			if err != nil {
				b.Fatal(err)
			}
			return tr
		}},
	}
	for _, k := range kinds {
		b.Run(k.name+"/keepalive", func(b *testing.B) {
			addr := gatewaytest.Serve(b, k.new())
			conn := gatewaytest.Dial(b, addr)
			br := bufio.NewReader(conn)
			var resp fasthttp.Response
			npBenchRoundTrip(b, conn, br, &resp) // warm up
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				npBenchRoundTrip(b, conn, br, &resp)
			}
		})
		b.Run(k.name+"/parallel64", func(b *testing.B) {
			addr := gatewaytest.Serve(b, k.new())
			b.ReportAllocs()
			b.SetParallelism(max(64/runtime.GOMAXPROCS(0), 1))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				conn, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					b.Error(err)
					return
				}
				defer conn.Close()
				br := bufio.NewReader(conn)
				var resp fasthttp.Response
				for pb.Next() {
					npBenchRoundTrip(b, conn, br, &resp)
				}
			})
		})
		b.Run(k.name+"/pipelined16", func(b *testing.B) {
			addr := gatewaytest.Serve(b, k.new())
			conn := gatewaytest.Dial(b, addr)
			br := bufio.NewReader(conn)
			var resp fasthttp.Response
			batch := bytes.Repeat(npBenchRequest, 16)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += 16 {
				if _, err := conn.Write(batch); err != nil {
					b.Fatal(err)
				}
				for range 16 {
					if err := resp.Read(br); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

func npBenchRoundTrip(b *testing.B, conn net.Conn, br *bufio.Reader, resp *fasthttp.Response) {
	if _, err := conn.Write(npBenchRequest); err != nil {
		b.Fatal(err)
	}
	if err := resp.Read(br); err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode() != 200 {
		b.Fatalf("status %d", resp.StatusCode())
	}
}
