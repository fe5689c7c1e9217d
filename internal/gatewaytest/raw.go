package gatewaytest

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/valyala/fasthttp"
)

// Dial opens a TCP connection to addr, closed when the test ends; tests
// write raw bytes on it for what a well-behaved client never sends.
func Dial(tb testing.TB, addr string) net.Conn {
	tb.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// Write writes s to conn as it is.
func Write(tb testing.TB, conn net.Conn, s string) {
	tb.Helper()
	if _, err := conn.Write([]byte(s)); err != nil {
		tb.Fatalf("write: %v", err)
	}
}

// ReadAnswer reads one answer from br, conn's reader, within 5 s (an
// answer to HEAD, without its body, when head is set).
func ReadAnswer(tb testing.TB, conn net.Conn, br *bufio.Reader, head bool) *fasthttp.Response {
	tb.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp := &fasthttp.Response{}
	resp.SkipBody = head
	if err := resp.Read(br); err != nil {
		tb.Fatalf("reading response: %v", err)
	}
	return resp
}

// ExpectClosed waits up to wait for the server to close conn, discarding
// what it still sends, and returns how long that took.
func ExpectClosed(tb testing.TB, conn net.Conn, br *bufio.Reader, wait time.Duration) time.Duration {
	tb.Helper()
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(wait))
	for {
		_, err := br.ReadByte()
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			tb.Fatalf("connection still open after %v", wait)
		}
		return time.Since(start)
	}
}

// Check fails the test unless resp has status and body.
func Check(tb testing.TB, resp *fasthttp.Response, status int, body string) {
	tb.Helper()
	if resp.StatusCode() != status || string(resp.Body()) != body {
		tb.Fatalf("got %d %q, want %d %q", resp.StatusCode(), resp.Body(), status, body)
	}
}

// Exchange sends raw, one request as it is, to the gateway on a connection
// of its own and returns the answer, and the request up (the gateway's
// recording upstream) received for it when one reached it.
func (g *Gateway) Exchange(tb testing.TB, up *testutil.RecordingUpstream, raw string) (status int, body string, got testutil.RawRequest, ok bool) {
	tb.Helper()
	before := up.Count()
	conn, err := net.DialTimeout("tcp", g.Addr, time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := conn.Write([]byte(raw)); err != nil {
		tb.Fatal(err)
	}
	var resp fasthttp.Response
	resp.SkipBody = strings.HasPrefix(raw, "HEAD ")
	if err := resp.Read(bufio.NewReader(conn)); err != nil {
		tb.Fatalf("%q: no answer: %v", raw, err)
	}
	status, body = resp.StatusCode(), string(resp.Body())
	if up.Count() > before {
		got, ok = up.Last()
	}
	return status, body, got, ok
}
