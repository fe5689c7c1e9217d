package server_test

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/valyala/fasthttp"
)

// answerRoutes: everything to ${UP}; /limited/ has a response filter (the
// limit's headers), /streamed/ a service that streams answers.
const answerRoutes = `
services:
  up:
    instances: [{addr: "${UP}"}]
    timeouts: {connect: 500ms, read: 1s, total: 2s}
  streamed:
    instances: [{addr: "${UP}"}]
    timeouts: {connect: 500ms, read: 1s, total: 2s}
    stream_response: true
routes:
  - name: limited
    match: {prefix: /limited/}
    limits: [{by: header.X-Tenant, rate: 2, per: 1m, burst: 2, headers: true}]
    service: up
  - name: streamed
    match: {prefix: /streamed/}
    service: streamed
  - name: all
    match: {prefix: /}
    service: up
`

// clientAnswer is one answer as the client got it: parsed, and its header
// section's bytes.
type clientAnswer struct {
	resp *fasthttp.Response
	head string
}

func askOn(t *testing.T, conn net.Conn, br *bufio.Reader, path string) clientAnswer {
	t.Helper()
	return askWith(t, conn, br, "GET", path)
}

// askWith sends method path (a POST with a 4-byte body) and reads the
// answer.
func askWith(t *testing.T, conn net.Conn, br *bufio.Reader, method, path string) clientAnswer {
	t.Helper()
	req := method + " " + path + " HTTP/1.1\r\nHost: a\r\n\r\n"
	if method == "POST" {
		req = method + " " + path + " HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nbody"
	}
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	return readAnswer(t, conn, br)
}

// readAnswer reads one answer from the client's connection.
func readAnswer(t *testing.T, conn net.Conn, br *bufio.Reader) clientAnswer {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var head bytes.Buffer
	for !bytes.HasSuffix(head.Bytes(), []byte("\r\n\r\n")) {
		line, err := br.ReadSlice('\n')
		if err != nil {
			t.Fatalf("%v after %q", err, head.String())
		}
		head.Write(line)
	}
	resp := &fasthttp.Response{}
	if err := resp.Read(bufio.NewReader(io.MultiReader(bytes.NewReader(head.Bytes()), br))); err != nil {
		t.Fatal(err)
	}
	return clientAnswer{resp: resp, head: head.String()}
}

// TestUpstreamAnswerPassedOn: what a backend answers reaches the client
// less what is the connection's or the gateway's, on every transport: on
// the event loop's routes without response filters the section is passed
// as read (the backend's spelling kept), elsewhere through fasthttp. A
// backend that writes more than its answer, closes, or cuts its body short
// cannot get anything but its one answer to the client.
func TestUpstreamAnswerPassedOn(t *testing.T) {
	const backend = "HTTP/1.1 200 OK\r\nx-Backend-Case: Kept\r\nKeep-Alive: timeout=5\r\nProxy-Authenticate: Basic\r\n" +
		"Upgrade: h2c\r\ntraceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\nX-Request-Id: forged\r\n" +
		"X-Request-Id: forged-again\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nX-RateLimit-Remaining: 99\r\nContent-Length: 2\r\n\r\nok"
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := testutil.StartRecordingUpstream(t)
			const smuggled = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled"
			up.SetAnswer(func(r testutil.RawRequest) testutil.ScriptedAnswer {
				switch strings.TrimPrefix(strings.Fields(r.Line())[1], "/streamed") {
				case "/smuggle":
					return testutil.ScriptedAnswer{Raw: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" + smuggled}
				case "/smuggle-later":
					return testutil.ScriptedAnswer{Raw: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", Later: smuggled, Pause: 30 * time.Millisecond}
				case "/close":
					return testutil.ScriptedAnswer{Raw: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 6\r\n\r\nclosed", Close: true}
				case "/cut":
					return testutil.ScriptedAnswer{Raw: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", Close: true}
				}
				return testutil.ScriptedAnswer{Raw: backend}
			})
			g := gatewaytest.Start(t, answerRoutes, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}})
			conn, err := net.Dial("tcp", g.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			br := bufio.NewReader(conn)

			for _, path := range []string{"/plain", "/limited/plain"} {
				a := askOn(t, conn, br, path)
				h := &a.resp.Header
				if a.resp.StatusCode() != 200 || string(a.resp.Body()) != "ok" {
					t.Fatalf("%s: %d %q", path, a.resp.StatusCode(), a.resp.Body())
				}
				for _, k := range []string{"Keep-Alive", "Proxy-Authenticate", "Upgrade"} {
					if h.Peek(k) != nil {
						t.Errorf("%s: hop-by-hop %s reached the client", path, k)
					}
				}
				if n := strings.Count(strings.ToLower(a.head), "\r\nx-request-id:"); n != 1 {
					t.Errorf("%s: %d X-Request-Id fields, want the gateway's alone:\n%s", path, n, a.head)
				}
				tp, rid := string(h.Peek("Traceparent")), string(h.Peek("X-Request-Id"))
				if n := strings.Count(strings.ToLower(a.head), "\r\ntraceparent:"); n != 1 || strings.Contains(tp, "0af7651916cd43dd") || len(tp) != 55 || tp[3:35] != rid {
					t.Errorf("%s: traceparent %q (%d), request id %q: want the gateway's", path, tp, n, rid)
				}
				if n := strings.Count(a.head, "\r\nSet-Cookie: "); n != 2 {
					t.Errorf("%s: %d Set-Cookie fields, want both", path, n)
				}
				if n := strings.Count(a.head, "\r\nX-Ratelimit-Remaining: 99\r\n") + strings.Count(a.head, "\r\nX-RateLimit-Remaining: 99\r\n"); n != 1 {
					t.Errorf("%s: the backend's X-RateLimit-Remaining not passed once:\n%s", path, a.head)
				}
				if asRead := strings.Contains(a.head, "\r\nx-Backend-Case: Kept\r\n"); asRead != (kind == "reactor" && path == "/plain") {
					t.Errorf("%s: section passed as read: %v, on %s:\n%s", path, asRead, kind, a.head)
				}
			}

			// Bytes behind an answer are no answer: the client gets the
			// first, and its next request goes on a new upstream connection.
			if a := askOn(t, conn, br, "/smuggle"); string(a.resp.Body()) != "ok" {
				t.Fatalf("smuggle: %q", a.resp.Body())
			}
			before := up.Conns.Load()
			if a := askOn(t, conn, br, "/plain"); string(a.resp.Body()) != "ok" {
				t.Fatalf("after smuggle: %d %q", a.resp.StatusCode(), a.resp.Body())
			}
			// The loop's pool closes it; fasthttp's client drops what its
			// reader holds with the reader and keeps the connection.
			if kind == "reactor" && up.Conns.Load() == before {
				t.Error("the upstream connection with bytes behind its answer was used again")
			}

			// Bytes that come while the connection is idle are no answer
			// either: the loop's pool drops a connection that turned
			// readable, fasthttp's finds them before it writes a request
			// (guardedConn), and the request goes on another connection,
			// a POST too: none of it was sent.
			for _, prefix := range []string{"", "/streamed"} { // fasthttp's client for streamed answers too
				for _, next := range []string{"GET", "POST"} {
					if a := askOn(t, conn, br, prefix+"/smuggle-later"); string(a.resp.Body()) != "ok" {
						t.Fatalf("%s: smuggle later: %q", prefix, a.resp.Body())
					}
					time.Sleep(100 * time.Millisecond)
					if a := askWith(t, conn, br, next, prefix+"/plain"); string(a.resp.Body()) != "ok" {
						t.Fatalf("%s: %s after bytes sent on an idle connection: %d %q", prefix, next, a.resp.StatusCode(), a.resp.Body())
					}
				}
			}

			// The backend's close is its connection's, not the client's.
			if a := askOn(t, conn, br, "/close"); string(a.resp.Body()) != "closed" || a.resp.ConnectionClose() {
				t.Fatalf("close: %q, client told to close: %v", a.resp.Body(), a.resp.ConnectionClose())
			}
			// A body cut short is a failed exchange.
			if a := askOn(t, conn, br, "/cut"); a.resp.StatusCode() != fasthttp.StatusBadGateway {
				t.Fatalf("cut: %d %q\n%s", a.resp.StatusCode(), a.resp.Body(), a.head)
			}
			if a := askOn(t, conn, br, "/plain"); string(a.resp.Body()) != "ok" {
				t.Fatalf("last: %d %q", a.resp.StatusCode(), a.resp.Body())
			}
		})
	}
}

// TestUpstreamEarlyAnswer: a backend may answer before it read the whole
// body (413 to an upload it will not take, reading the rest to keep the
// connection). The look for stray bytes on idle connections happens
// before a request's first write only, so such an answer still reaches
// the client on every transport, and the connection serves the next
// request.
func TestUpstreamEarlyAnswer(t *testing.T) {
	t.Parallel()
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := testutil.StartRecordingUpstream(t)
			up.SetAnswer(func(r testutil.RawRequest) testutil.ScriptedAnswer {
				if len(r.Values("Content-Length")) > 0 {
					return testutil.ScriptedAnswer{Raw: "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 4\r\n\r\nbig!", Early: true}
				}
				return testutil.ScriptedAnswer{Raw: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"}
			})
			g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}})
			conn, err := net.Dial("tcp", g.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			br := bufio.NewReader(conn)
			body := strings.Repeat("u", 2<<20) // more than the sockets hold: written while the answer is already there
			for i := range 3 {
				if _, err := io.WriteString(conn, "POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body); err != nil {
					t.Fatal(err)
				}
				a := readAnswer(t, conn, br)
				if a.resp.StatusCode() != 413 || string(a.resp.Body()) != "big!" {
					t.Fatalf("upload %d: %d %q, want the backend's early 413", i, a.resp.StatusCode(), a.resp.Body())
				}
				if a := askOn(t, conn, br, "/after"); string(a.resp.Body()) != "ok" {
					t.Fatalf("after upload %d: %d %q", i, a.resp.StatusCode(), a.resp.Body())
				}
			}
		})
	}
}
