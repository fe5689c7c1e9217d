package server_test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/server"
)

// malformed lists every request SPEC §1 says the edge refuses with 400 and
// a close. Some carry a second, smuggled request after the first.
var malformed = []struct{ name, raw string }{
	{"CL and TE", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"TE and CL", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 40\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"conflicting CL", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 30\r\n\r\nabc"},
	{"duplicate CL", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc"},
	{"CL list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\nabc"},
	{"CL not a number", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3a\r\n\r\nabc"},
	{"CL negative", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -3\r\n\r\nabc"},
	{"TE gzip", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\nabc"},
	{"TE chunked then gzip", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n"},
	{"TE identity", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n"},
	{"TE twice", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
	{"TE with space name", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n"},
	{"TE in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
	{"obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n"},
	{"NUL in value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x00c\r\n\r\n"},
	{"CR in value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\rc\r\n\r\n"},
	{"control byte in value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x0bc\r\n\r\n"},
	{"invalid chunk size", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"},
	{"chunk size overflow", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nabc\r\n0\r\n\r\n"},
	{"chunk without CRLF", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX0\r\n\r\n"},
	{"invalid method", "G(T / HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"lowercase method", "get / HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"CONNECT", "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"},
	{"HTTP/2.0 version", "GET / HTTP/2.0\r\nHost: a\r\n\r\n"},
	{"HTTP/1.2 version", "GET / HTTP/1.2\r\nHost: a\r\n\r\n"},
	{"garbage version", "GET / HTXP/1.1\r\nHost: a\r\n\r\n"},
	{"missing Host", "GET / HTTP/1.1\r\n\r\n"},
	{"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"},
	{"relative target", "GET index.html HTTP/1.1\r\nHost: a\r\n\r\n"},
	{"space in header name", "GET / HTTP/1.1\r\nHost: a\r\nX A: b\r\n\r\n"},
}

func TestMalformedRequestsAreRefusedAndNeverForwarded(t *testing.T) {
	t.Parallel()
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := testutil.StartRawUpstream(t)
			g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}})
			for _, tc := range malformed {
				t.Run(tc.name, func(t *testing.T) {
					res := testutil.RawExchange(t, g.Addr, []byte(tc.raw), 2, 3*time.Second)
					if len(res.Responses) != 1 {
						t.Fatalf("got %d responses, want exactly 1", len(res.Responses))
					}
					r := res.Responses[0]
					if st := r.StatusCode(); st != 400 && st != 405 {
						t.Fatalf("status %d (%s), want 400", st, r.Body())
					}
					if !gatewaytest.HasJSONCode(r.Body(), fmt.Sprint(r.StatusCode())) || string(r.Header.ContentType()) != "application/json" {
						t.Fatalf("body %q is not the JSON error shape", r.Body())
					}
					if !res.Closed {
						t.Fatal("connection left open after a framing error")
					}
				})
			}
			// Give any (wrongly) forwarded bytes time to arrive.
			time.Sleep(100 * time.Millisecond)
			if n := up.Bytes.Load(); n != 0 {
				t.Fatalf("%d bytes reached the upstream over %d connections", n, up.Conns.Load())
			}
		})
	}
}

func TestOneUpstreamRequestPerClientRequest(t *testing.T) {
	t.Parallel()
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := testutil.StartUpstream(t, "ok")
			g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}})
			raw := "GET /one HTTP/1.1\r\nHost: a\r\n\r\n" +
				"POST /two HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n" +
				"POST /three HTTP/1.1\r\nHost: a\r\nContent-Length: 35\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n" +
				"GET /four HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
			res := testutil.RawExchange(t, g.Addr, []byte(raw), 4, 5*time.Second)
			if len(res.Responses) != 4 {
				t.Fatalf("got %d responses, want 4", len(res.Responses))
			}
			for i, r := range res.Responses {
				if r.StatusCode() != 200 {
					t.Fatalf("response %d: %d %s", i, r.StatusCode(), r.Body())
				}
			}
			if !res.Closed {
				t.Fatal("Connection: close not honoured")
			}
			seen := up.Seen()
			if len(seen) != 4 {
				t.Fatalf("upstream got %d requests, want 4: %+v", len(seen), seen)
			}
			want := []struct{ uri, body string }{
				{"/one", ""}, {"/two", "hello world"}, {"/three", "GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n"}, {"/four", ""},
			}
			for i, w := range want {
				if seen[i].URI != w.uri || string(seen[i].Body) != w.body {
					t.Fatalf("upstream request %d = %s %q, want %s %q", i, seen[i].URI, seen[i].Body, w.uri, w.body)
				}
			}
		})
	}
}

func TestClientLimits(t *testing.T) {
	cfg := gatewaytest.OneService + "client: {max_header_bytes: 2048, max_uri_bytes: 512, max_body_bytes: 1000, stream_body_bytes: 100}\n"
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := testutil.StartUpstream(t, "ok")
			g := gatewaytest.Start(t, cfg, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}})
			cases := []struct {
				name string
				raw  string
				want int
			}{
				{"header too large", "GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("b", 3000) + "\r\n\r\n", 431},
				{"uri too long", "GET /" + strings.Repeat("u", 800) + " HTTP/1.1\r\nHost: a\r\n\r\n", 414},
				{"declared body too large", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1001\r\n\r\n", 413},
				{"chunked body too large", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" +
					strings.Repeat("64\r\n"+strings.Repeat("x", 100)+"\r\n", 12) + "0\r\n\r\n", 413},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					res := testutil.RawExchange(t, g.Addr, []byte(tc.raw), 1, 3*time.Second)
					if len(res.Responses) != 1 || res.Responses[0].StatusCode() != tc.want {
						t.Fatalf("got %d responses %v, want one %d", len(res.Responses), res.Statuses(), tc.want)
					}
					if !gatewaytest.HasJSONCode(res.Responses[0].Body(), fmt.Sprint(tc.want)) {
						t.Fatalf("body %q", res.Responses[0].Body())
					}
				})
			}
			// A body within the limit but above the stream threshold goes
			// through whole.
			body := strings.Repeat("y", 900)
			res := testutil.RawExchange(t, g.Addr, []byte("POST /ok HTTP/1.1\r\nHost: a\r\nContent-Length: 900\r\n\r\n"+body), 1, 3*time.Second)
			if len(res.Responses) != 1 || res.Responses[0].StatusCode() != 200 || string(up.Last().Body) != body {
				t.Fatalf("streamed body: %v, upstream got %d bytes", res.Statuses(), len(up.Last().Body))
			}
		})
	}
}

func TestHeaderTimeoutCutsSlowloris(t *testing.T) {
	t.Parallel()
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := testutil.StartUpstream(t, "ok")
			g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}, Tweak: func(o *server.Options) {
				o.HeaderTimeout = 400 * time.Millisecond
			}})
			conn, err := net.Dial("tcp", g.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			start := time.Now()
			// One byte every 100ms never finishes a header section.
			closed := false
			for i := 0; i < 60 && !closed; i++ {
				if _, err := conn.Write([]byte("X")); err != nil {
					closed = true
					break
				}
				time.Sleep(100 * time.Millisecond)
				_ = conn.SetReadDeadline(time.Now().Add(time.Millisecond))
				buf := make([]byte, 512)
				if _, err := conn.Read(buf); err != nil {
					if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
						closed = true
					}
				} else {
					closed = true // an answer (408/400) then the close
				}
			}
			if !closed {
				t.Fatal("a client trickling header bytes was never cut off")
			}
			if took := time.Since(start); took > 4*time.Second {
				t.Fatalf("cut off after %v, want about the 400ms header timeout", took)
			}
			if up.Requests.Load() != 0 {
				t.Fatal("a partial request reached the upstream")
			}
		})
	}
}

func TestIdleTimeoutClosesKeepAlive(t *testing.T) {
	t.Parallel()
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := testutil.StartUpstream(t, "ok")
			g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}, Tweak: func(o *server.Options) {
				o.IdleTimeout = 500 * time.Millisecond
			}})
			conn, err := net.Dial("tcp", g.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			res := testutil.ReadResponses(t, conn, 1, 2*time.Second)
			if len(res.Responses) != 1 {
				t.Fatal("no answer")
			}
			_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			start := time.Now()
			_, err = conn.Read(make([]byte, 1))
			if err == nil {
				t.Fatal("unexpected bytes")
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("idle connection still open after 3s")
			}
			if took := time.Since(start); took > 2500*time.Millisecond {
				t.Fatalf("closed after %v", took)
			}
		})
	}
}
