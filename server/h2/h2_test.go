package h2_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/server"
	"github.com/tollgate/tollgate/server/h2"
	"golang.org/x/net/http2"
)

// h2Routes: everything to the recording upstream; /limited/ allows two
// requests per tenant and minute, with the limit's headers on answers.
const h2Routes = `
services:
  up:
    instances: [{addr: "${UP}"}]
    timeouts: {connect: 500ms, read: 1s, total: 2s}
routes:
  - name: limited
    match: {prefix: /limited/}
    limits: [{by: header.X-Tenant, rate: 2, per: 1m, burst: 2, headers: true}]
    service: up
  - name: all
    match: {prefix: /}
    service: up
`

// TestHTTP2SameAsHTTP1: an h2 client gets the answers, headers and limits
// an HTTP/1.1 client gets, and the backend cannot tell them apart but for
// the fields' order.
func TestHTTP2SameAsHTTP1(t *testing.T) {
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := gatewaytest.StartH2(t, h2Routes, h2.Options{StreamBodyBytes: 64 << 10, MaxBodyBytes: 1 << 20}, gatewaytest.Options{Transport: kind})
			h1c, h2c := e.Client(false), e.Client(true)
			hdr := map[string]string{"X-Test": "v1", "User-Agent": "probe", "X-Forwarded-For": "6.6.6.6"}

			upstreamOf := func(c *http.Client, method, path string, body []byte) (*http.Response, []byte, testutil.RawRequest) {
				n := e.Up.Count()
				resp, b := e.Do(t, c, method, path, body, hdr)
				reqs := e.Up.Requests()
				if len(reqs) != n+1 {
					t.Fatalf("%s %s: the backend got %d requests, want 1", method, path, len(reqs)-n)
				}
				return resp, b, reqs[n]
			}
			for _, tc := range []struct {
				method, path string
				body         []byte
			}{
				{"GET", "/x/y?a=1&b=%2F", nil},
				{"POST", "/post", bytes.Repeat([]byte("b"), 10_000)},   // read whole
				{"PUT", "/stream", bytes.Repeat([]byte("s"), 300_000)}, // streamed
				{"GET", "/a/%2e%2e/b", nil},                            // canonical path, as over HTTP/1.1
				{"DELETE", "/d", []byte{}},
			} {
				r1, b1, u1 := upstreamOf(h1c, tc.method, tc.path, tc.body)
				r2, b2, u2 := upstreamOf(h2c, tc.method, tc.path, tc.body)
				if r1.ProtoMajor != 1 || r2.ProtoMajor != 2 {
					t.Fatalf("protocols %s and %s", r1.Proto, r2.Proto)
				}
				if r1.StatusCode != r2.StatusCode || !bytes.Equal(b1, b2) {
					t.Fatalf("%s %s: h1 %d %q, h2 %d %q", tc.method, tc.path, r1.StatusCode, b1, r2.StatusCode, b2)
				}
				if u1.Line() != u2.Line() || !bytes.Equal(u1.Body, u2.Body) || !bytes.Equal(u2.Body, tc.body) {
					t.Fatalf("%s %s: backend got %q (%d bytes) over h1, %q (%d bytes) over h2", tc.method, tc.path,
						u1.Line(), len(u1.Body), u2.Line(), len(u2.Body))
				}
				for _, name := range []string{"Host", "X-Test", "User-Agent", "X-Forwarded-For", "X-Forwarded-Proto"} {
					if v1, v2 := u1.Values(name), u2.Values(name); !slices.Equal(v1, v2) {
						t.Fatalf("%s %s: backend's %s is %q over h1, %q over h2", tc.method, tc.path, name, v1, v2)
					}
				}
				if xff := u2.Values("X-Forwarded-For"); !slices.Equal(xff, []string{"127.0.0.1"}) {
					t.Fatalf("spoofed X-Forwarded-For reached the backend over h2: %q", xff)
				}
				for _, name := range []string{"Connection", "Keep-Alive", "Upgrade", "TE", "Transfer-Encoding"} {
					if v := u2.Values(name); len(v) > 0 {
						t.Fatalf("%s reached the backend over h2: %q", name, v)
					}
				}
				if names(r1.Header) != names(r2.Header) {
					t.Fatalf("answer fields differ:\nh1 %s\nh2 %s", names(r1.Header), names(r2.Header))
				}
			}

			// The same limit, with the same headers, on either protocol.
			var h1statuses []int
			for _, c := range []*http.Client{h1c, h2c} {
				tenant := map[string]string{"X-Tenant": fmt.Sprintf("t-%p", c)}
				var got []int
				var last *http.Response
				var lastBody []byte
				for range 3 {
					last, lastBody = e.Do(t, c, "GET", "/limited/x", nil, tenant)
					got = append(got, last.StatusCode)
				}
				if h1statuses == nil {
					h1statuses = got
				}
				if got[0] != 200 || got[1] != 200 || got[2] == 200 || !slices.Equal(got, h1statuses) ||
					last.Header.Get("Retry-After") == "" || last.Header.Get("X-RateLimit-Limit") != "2" ||
					!bytes.Contains(lastBody, []byte("rate limit")) {
					t.Fatalf("%T: statuses %v (h1 %v), last %v %s", c.Transport, got, h1statuses, last.Header, lastBody)
				}
			}

			// Over the body limit: 413 before the backend sees a byte.
			n := e.Up.Count()
			resp, _ := e.Do(t, h2c, "POST", "/big", bytes.Repeat([]byte("x"), 2<<20), nil)
			if resp.StatusCode != 413 || e.Up.Count() != n {
				t.Fatalf("2 MiB body: %d, backend saw %d", resp.StatusCode, e.Up.Count()-n)
			}
		})
	}
}

func names(h http.Header) string {
	var out []string
	for k := range h {
		if k != "Date" {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// TestHTTP2Curl: curl speaking h2 (ALPN) gets the backend's answer.
func TestHTTP2Curl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is needed (make test-deps installs it)")
	}
	e := gatewaytest.StartH2(t, h2Routes, h2.Options{}, gatewaytest.Options{})
	caFile := filepath.Join(e.Dir, "ca.pem")
	if err := os.WriteFile(caFile, e.CA.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(e.Addr)
	out, err := exec.Command(curl, "-sS", "--http2", "-i", "--cacert", caFile,
		"--resolve", "a.test:"+port+":127.0.0.1", "-H", "X-Test: curl", "https://a.test:"+port+"/from-curl?q=1").CombinedOutput()
	if err != nil {
		t.Fatalf("curl: %v\n%s", err, out)
	}
	if !bytes.HasPrefix(out, []byte("HTTP/2 200")) || !bytes.HasSuffix(out, []byte("ok")) {
		t.Fatalf("curl got:\n%s", out)
	}
	last, _ := e.Up.Last()
	if last.Line() != "GET /from-curl?q=1 HTTP/1.1" || !slices.Equal(last.Values("X-Test"), []string{"curl"}) ||
		!slices.Equal(last.Values("Host"), []string{"a.test:" + port}) {
		t.Fatalf("backend got:\n%s", last.Head)
	}
}

// TestHTTP2EdgeSafety: the tricks of the HTTP/1.1 edge-safety suite, in
// HTTP/2's terms, never reach the backend: malformed requests (a Host
// naming another host than :authority among them) are reset with
// PROTOCOL_ERROR, the treatment RFC 9113 §8.1.1 gives them, or answered
// 400 by the gateway's own checks; the connection goes on serving.
func TestHTTP2EdgeSafety(t *testing.T) {
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := gatewaytest.StartH2(t, h2Routes, h2.Options{}, gatewaytest.Options{Transport: kind})
			r := e.DialH2(t)
			for _, tc := range []struct {
				name   string
				fields []string
				body   []byte
				status string // "" for a stream reset (or 400: x/net or the gateway may refuse it)
			}{
				{"duplicate :path", append(gatewaytest.H2Get("/a"), ":path", "/admin"), nil, ""},
				{"pseudo after regular", []string{":method", "GET", ":scheme", "https", "x-a", "1", ":authority", "a.test", ":path", "/a"}, nil, ""},
				{"unknown pseudo", gatewaytest.H2Get("/a", ":foo", "bar"), nil, ""},
				{"missing :path", []string{":method", "GET", ":scheme", "https", ":authority", "a.test"}, nil, ""},
				{"upper-case name", gatewaytest.H2Get("/a", "X-Up", "1"), nil, ""},
				{"connection field", gatewaytest.H2Get("/a", "connection", "keep-alive"), nil, ""},
				{"transfer-encoding", gatewaytest.H2Get("/a", "transfer-encoding", "chunked"), []byte("3\r\nabc\r\n0\r\n\r\n"), ""},
				{"te other than trailers", gatewaytest.H2Get("/a", "te", "gzip"), nil, ""},
				{"CRLF in a value", gatewaytest.H2Get("/a", "x-a", "b\r\nx-injected: 1"), nil, ""},
				{"CRLF in :path", gatewaytest.H2Get("/a HTTP/1.1\r\nx-injected: 1\r\nx-b: /"), nil, ""},
				{"space in :method", append([]string{":method", "GET /b"}, gatewaytest.H2Get("/a")[2:]...), nil, ""},
				{"length longer than the data", gatewaytest.H2Get("/a", "content-length", "10"), []byte("abc"), ""},
				{"length with no body at all", append([]string{":method", "POST"}, append(gatewaytest.H2Get("/a")[2:], "content-length", "10")...), nil, "400"},
				{"Host and :authority differ", gatewaytest.H2Get("/a", "host", "evil.test"), nil, ""},
				{"Host and :authority differ in case", gatewaytest.H2Get("/a", "host", "A.TEST"), nil, ""},
				{"two Host fields", gatewaytest.H2Get("/a", "host", "a.test", "host", "evil.test"), nil, ""},
				{"userinfo in :authority", []string{":method", "GET", ":scheme", "https", ":authority", "u@evil.test", ":path", "/a"}, nil, ""},
				{"two content-lengths", gatewaytest.H2Get("/a", "content-length", "3", "content-length", "3"), []byte("abc"), "400"},
				{"no authority, no host", []string{":method", "GET", ":scheme", "https", ":path", "/a"}, nil, "400"},
				{"double-encoded dot segments", gatewaytest.H2Get("/api/order/%252e%252e/%252e%252e/v1/order/create"), nil, "400"},
				{"encoded CRLF in the path", gatewaytest.H2Get("/a%0d%0aX:1"), nil, "400"},
				{"..; segment", gatewaytest.H2Get("/..;/admin"), nil, "400"},
				{"absolute :path", gatewaytest.H2Get("https://evil.test/a"), nil, ""},
			} {
				n := e.Up.Count()
				o := r.Await(r.Send(tc.body, tc.fields...))
				switch {
				case o.GoAway:
					t.Fatalf("%s: the connection was closed (%v)", tc.name, o.Reset)
				case tc.status == "" && o.Reset == 0 && o.Status != "400":
					t.Fatalf("%s: answered %s %q, want a stream reset (or 400)", tc.name, o.Status, o.Body)
				case tc.status != "" && o.Status != tc.status:
					t.Fatalf("%s: status %q (reset %v), want %s", tc.name, o.Status, o.Reset, tc.status)
				case tc.status != "" && !bytes.Contains(o.Body, []byte(`"code":400`)):
					t.Fatalf("%s: body %q, want the gateway's JSON error", tc.name, o.Body)
				}
				if e.Up.Count() != n {
					last, _ := e.Up.Last()
					t.Fatalf("%s reached the backend:\n%s", tc.name, last.Head)
				}
			}
			// Same :authority and Host: one request, served.
			if o := r.Await(r.Send(nil, gatewaytest.H2Get("/fine", "host", "a.test")...)); o.Status != "200" {
				t.Fatalf("a well-formed request after the tricks: %+v", o)
			}
			for _, req := range e.Up.Requests() {
				if strings.Contains(strings.ToLower(req.Head), "injected") || strings.Contains(req.Head, "evil") {
					t.Fatalf("backend got:\n%s", req.Head)
				}
			}
		})
	}
}

// TestHTTP2Settings: what the gateway advertises is what it was told.
func TestHTTP2Settings(t *testing.T) {
	e := gatewaytest.StartH2(t, h2Routes, h2.Options{MaxConcurrentStreams: 7, MaxHeaderListBytes: 4096, StreamWindow: 32 << 10}, gatewaytest.Options{})
	r := e.DialH2(t)
	_ = r.Conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		f, err := r.Framer.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		sf, ok := f.(*http2.SettingsFrame)
		if !ok || sf.IsAck() {
			continue
		}
		want := map[http2.SettingID]uint32{
			http2.SettingMaxConcurrentStreams: 7,
			http2.SettingInitialWindowSize:    32 << 10,
		}
		for id, v := range want {
			if got, ok := sf.Value(id); !ok || got != v {
				t.Fatalf("%v = %d (%v), want %d", id, got, ok, v)
			}
		}
		if got, ok := sf.Value(http2.SettingMaxHeaderListSize); !ok || got < 4096 || got > 4096+1024 {
			t.Fatalf("MAX_HEADER_LIST_SIZE %d", got)
		}
		return
	}
}

// TestHTTP2RapidReset (CVE-2023-44487): a client opening streams and
// resetting them at once is cut off after a bounded number of them, most
// never reach the backend, memory stays bounded, and others are served.
func TestHTTP2RapidReset(t *testing.T) {
	if testing.Short() {
		t.Skip("floods resets")
	}
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			e := gatewaytest.StartH2(t, h2Routes, h2.Options{}, gatewaytest.Options{Transport: kind})
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)

			sent, cut, err := testutil.H2RapidReset(e.Addr, &tls.Config{ServerName: "a.test", RootCAs: e.CA.Pool()}, "a.test", "/flood", 20_000)
			if err != nil {
				t.Fatal(err)
			}
			if !cut {
				t.Fatalf("after %d reset streams the connection is still open", sent)
			}
			served := e.Up.Count()
			if served > 1000 {
				t.Fatalf("%d of %d reset streams reached the backend", served, sent)
			}
			counted := int64(0)
			for reason, n := range e.H2.Stats().Refused {
				if strings.HasSuffix(reason, "early_resets") { // ours, or x/net's conn_ENHANCE_YOUR_CALM_too_many_early_resets
					counted += n
				}
			}
			if counted == 0 {
				t.Fatalf("no flood refusal counted: %+v", e.H2.Stats())
			}
			var after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&after)
			if grown := int64(after.HeapInuse) - int64(before.HeapInuse); grown > 64<<20 {
				t.Fatalf("heap grew %d MiB", grown>>20)
			}
			t.Logf("%d streams sent, %d reached the backend, refusals %v", sent, served, e.H2.Stats().Refused)
			// Others are still served.
			resp, body := e.Do(t, e.Client(true), "GET", "/after", nil, nil)
			if resp.StatusCode != 200 || string(body) != "ok" {
				t.Fatalf("after the flood: %d %q", resp.StatusCode, body)
			}
		})
	}
}

// TestHTTP2ContinuationFlood: a header block that never ends — large
// CONTINUATION frames past the header-list limit, or empty ones forever —
// ends the connection, having cost a bounded amount of reading.
func TestHTTP2ContinuationFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the idle timeout")
	}
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := gatewaytest.StartH2(t, h2Routes, h2.Options{MaxHeaderListBytes: 8192, IdleTimeout: time.Second}, gatewaytest.Options{Transport: kind})

			// Large: fields of 4 KiB each, 16 KiB per frame, up to 64 MiB.
			r := e.DialH2(t)
			if err := r.Framer.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.Block(gatewaytest.H2Get("/c")...)}); err != nil {
				t.Fatal(err)
			}
			var frag []byte
			for range 4 {
				frag = append(frag, r.Block("x-pad", strings.Repeat("p", 4000))...)
			}
			written := 0
			_ = r.Conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
			for written < 64<<20 {
				if err := r.Framer.WriteContinuation(1, false, frag); err != nil {
					break
				}
				written += len(frag)
			}
			if written >= 64<<20 {
				t.Fatalf("64 MiB of CONTINUATION frames were taken")
			}
			t.Logf("large CONTINUATION frames: the connection ended after %d KiB written (socket buffers included)", written>>10)

			// Empty, trickled: the idle timeout ends the connection.
			r = e.DialH2(t)
			if err := r.Framer.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.Block(gatewaytest.H2Get("/c")...)}); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			for time.Since(start) < 10*time.Second {
				_ = r.Conn.SetWriteDeadline(time.Now().Add(time.Second))
				if err := r.Framer.WriteContinuation(1, false, nil); err != nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if d := time.Since(start); d >= 10*time.Second {
				t.Fatalf("empty CONTINUATION frames kept the connection %v", d)
			}
			if e.Up.Count() != 0 {
				t.Fatalf("the backend got %d requests", e.Up.Count())
			}
			resp, _ := e.Do(t, e.Client(true), "GET", "/after", nil, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("after the floods: %d", resp.StatusCode)
			}
		})
	}
}

// TestHTTP2Drain: a shutdown lets a request in flight on an h2 connection
// finish, tells the client to go away, and returns once it is answered.
func TestHTTP2Drain(t *testing.T) {
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			inflight := make(chan struct{}, 1)
			slow := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/inflight" {
					inflight <- struct{}{}
				}
				time.Sleep(400 * time.Millisecond)
				_, _ = io.WriteString(w, "slow")
			})}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = slow.Serve(ln) }()
			t.Cleanup(func() { _ = slow.Close() })

			e := gatewaytest.StartH2(t, gatewaytest.OneService, h2.Options{}, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": ln.Addr().String()}})
			c := e.Client(true)
			if resp, _ := e.Do(t, c, "GET", "/warm", nil, nil); resp.ProtoMajor != 2 {
				t.Fatal("not h2")
			}
			done := make(chan string, 1)
			go func() {
				resp, body := e.Do(t, c, "GET", "/inflight", nil, nil)
				done <- fmt.Sprint(resp.StatusCode, " ", string(body))
			}()
			<-inflight // the request reached the backend: it is in flight
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			if err := e.Transport.Shutdown(ctx); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
			if got := <-done; got != "200 slow" {
				t.Fatalf("the request in flight got %q", got)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("shutdown took %v", d)
			}
			if n := e.H2.Conns(); n != 0 {
				t.Fatalf("%d h2 connections left", n)
			}
		})
	}
}

// TestHTTP2MaxConns: h2 connections count against client.max_conns on
// every transport; one past it is closed.
func TestHTTP2MaxConns(t *testing.T) {
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := gatewaytest.StartH2(t, h2Routes, h2.Options{}, gatewaytest.Options{Transport: kind, Tweak: func(o *server.Options) { o.MaxConns = 2 }})
			var open []*gatewaytest.H2Conn
			for range 2 {
				r := e.DialH2(t)
				if o := r.Await(r.Send(nil, gatewaytest.H2Get("/ok")...)); o.Status != "200" {
					t.Fatalf("within the limit: %+v", o)
				}
				open = append(open, r)
			}
			conn, err := tls.Dial("tcp", e.Addr, &tls.Config{ServerName: "a.test", RootCAs: e.CA.Pool(), NextProtos: []string{"h2"}})
			if err == nil {
				defer conn.Close()
				_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
				_, _ = io.WriteString(conn, http2.ClientPreface)
				var b [1]byte
				for err == nil {
					_, err = conn.Read(b[:])
				}
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatal("a third h2 connection was served with max_conns 2")
				}
			}
			_ = open
		})
	}
}

// TestHTTP2DrainSaysGoAway: once the gateway drains (SIGTERM's delay),
// an h2 client's next answer is followed by a GOAWAY, as an HTTP/1.1
// client's carries Connection: close.
func TestHTTP2DrainSaysGoAway(t *testing.T) {
	e := gatewaytest.StartH2(t, h2Routes, h2.Options{}, gatewaytest.Options{})
	expectGoAwayOnDrain(t, e.DialH2(t), e.GW.Drain)
}

// expectGoAwayOnDrain: r's request before drain is answered without a
// GOAWAY; the one after is answered, and a GOAWAY comes.
func expectGoAwayOnDrain(t *testing.T, r *gatewaytest.H2Conn, drain func()) {
	t.Helper()
	if o := r.Await(r.Send(nil, gatewaytest.H2Get("/before")...)); o.Status != "200" || o.GoAway {
		t.Fatalf("before the drain: %+v", o)
	}
	drain()
	id := r.Send(nil, gatewaytest.H2Get("/during")...)
	_ = r.Conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	answered, goaway := false, false
	for !answered || !goaway {
		f, err := r.Framer.ReadFrame()
		if err != nil {
			t.Fatalf("answered %v, GOAWAY %v, then: %v", answered, goaway, err)
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			goaway = true
		case *http2.MetaHeadersFrame:
			if f.StreamID == id && f.PseudoValue("status") == "200" {
				answered = true
			}
		}
	}
}
