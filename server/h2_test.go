package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
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

	"github.com/tollgate/tollgate/edgetls"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/server/h2"
	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
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

// h2Edge is a TLS gateway offering h2 and http/1.1, with the HTTP/2
// server it hands h2 connections to.
type h2Edge struct {
	*tlsEdge
	srv *h2.Server
}

func startH2Edge(t *testing.T, kind string, o h2.Options) *h2Edge {
	t.Helper()
	return startH2EdgeOn(t, kind, o, h2Routes, "")
}

// startH2EdgeOn serves yaml with ${UP} at upAddr (a recording upstream
// when empty).
func startH2EdgeOn(t *testing.T, kind string, o h2.Options, yaml, upAddr string, tweaks ...func(*Options)) *h2Edge {
	t.Helper()
	dir := t.TempDir()
	ca := testutil.NewTestCA(t)
	ac, ak := ca.Issue(t, dir, "a", "A", "a.test")
	store, err := edgetls.NewStore([]edgetls.Pair{{Cert: ac, Key: ak}})
	if err != nil {
		t.Fatal(err)
	}
	up := testutil.StartRecordingUpstream(t)
	if upAddr == "" {
		upAddr = up.Addr
	}
	srv := h2.New(o)
	g := startGateway(t, kind, yaml, map[string]string{"UP": upAddr}, func(opt *Options) {
		opt.TLS = store.Config(tls.VersionTLS12, []string{"h2", "http/1.1"})
		opt.HTTP2 = srv
		for _, tw := range tweaks {
			tw(opt)
		}
	})
	return &h2Edge{tlsEdge: &tlsEdge{g: g, ca: ca, store: store, dir: dir, up: up}, srv: srv}
}

// client is a Go HTTP/2 client of the edge (h2) or an HTTP/1.1 one.
func (e *h2Edge) client(h2only bool) *http.Client {
	conf := &tls.Config{ServerName: "a.test", RootCAs: e.ca.Pool()}
	if h2only {
		return &http.Client{Timeout: 5 * time.Second, Transport: &http2.Transport{TLSClientConfig: conf, DisableCompression: true}}
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: conf, DisableCompression: true}}
}

// do sends one request for a.test to the edge.
func (e *h2Edge) do(t *testing.T, c *http.Client, method, path string, body []byte, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "https://"+e.g.Addr+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == nil {
		req.Body = nil
	}
	req.Host = "a.test"
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestHTTP2SameAsHTTP1: an h2 client gets the answers, headers and limits
// an HTTP/1.1 client gets, and the backend cannot tell them apart but for
// the fields' order.
func TestHTTP2SameAsHTTP1(t *testing.T) {
	for _, kind := range transports {
		t.Run(kind, func(t *testing.T) {
			e := startH2Edge(t, kind, h2.Options{StreamBodyBytes: 64 << 10, MaxBodyBytes: 1 << 20})
			h1c, h2c := e.client(false), e.client(true)
			hdr := map[string]string{"X-Test": "v1", "User-Agent": "probe", "X-Forwarded-For": "6.6.6.6"}

			upstreamOf := func(c *http.Client, method, path string, body []byte) (*http.Response, []byte, testutil.RawRequest) {
				n := e.up.Count()
				resp, b := e.do(t, c, method, path, body, hdr)
				reqs := e.up.Requests()
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
					last, lastBody = e.do(t, c, "GET", "/limited/x", nil, tenant)
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
			n := e.up.Count()
			resp, _ := e.do(t, h2c, "POST", "/big", bytes.Repeat([]byte("x"), 2<<20), nil)
			if resp.StatusCode != 413 || e.up.Count() != n {
				t.Fatalf("2 MiB body: %d, backend saw %d", resp.StatusCode, e.up.Count()-n)
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
	e := startH2Edge(t, "netpoll", h2.Options{})
	caFile := filepath.Join(e.dir, "ca.pem")
	if err := os.WriteFile(caFile, e.ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(e.g.Addr)
	out, err := exec.Command(curl, "-sS", "--http2", "-i", "--cacert", caFile,
		"--resolve", "a.test:"+port+":127.0.0.1", "-H", "X-Test: curl", "https://a.test:"+port+"/from-curl?q=1").CombinedOutput()
	if err != nil {
		t.Fatalf("curl: %v\n%s", err, out)
	}
	if !bytes.HasPrefix(out, []byte("HTTP/2 200")) || !bytes.HasSuffix(out, []byte("ok")) {
		t.Fatalf("curl got:\n%s", out)
	}
	last, _ := e.up.Last()
	if last.Line() != "GET /from-curl?q=1 HTTP/1.1" || !slices.Equal(last.Values("X-Test"), []string{"curl"}) ||
		!slices.Equal(last.Values("Host"), []string{"a.test:" + port}) {
		t.Fatalf("backend got:\n%s", last.Head)
	}
}

// h2Raw is an HTTP/2 client speaking frames, for what a well-behaved client
// never sends.
type h2Raw struct {
	t    *testing.T
	conn *tls.Conn
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
	next uint32
}

func (e *h2Edge) raw(t *testing.T) *h2Raw {
	t.Helper()
	conn, err := tls.Dial("tcp", e.g.Addr, &tls.Config{ServerName: "a.test", RootCAs: e.ca.Pool(), NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN chose %q", p)
	}
	r := &h2Raw{t: t, conn: conn, next: 1}
	r.fr = http2.NewFramer(conn, bufio.NewReader(conn))
	r.fr.ReadMetaHeaders = hpack.NewDecoder(65536, nil)
	r.enc = hpack.NewEncoder(&r.hbuf)
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := r.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return r
}

// block encodes fields (name, value pairs) as a header block.
func (r *h2Raw) block(fields ...string) []byte {
	r.hbuf.Reset()
	for i := 0; i+1 < len(fields); i += 2 {
		_ = r.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return slices.Clone(r.hbuf.Bytes())
}

// send opens a stream with fields and an optional body; it returns the id.
func (r *h2Raw) send(body []byte, fields ...string) uint32 {
	id := r.next
	r.next += 2
	err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.block(fields...),
		EndHeaders: true, EndStream: body == nil})
	if err == nil && body != nil {
		err = r.fr.WriteData(id, true, body)
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return id
}

// outcome is how the gateway ended a stream: its answer's status, or the
// code of the RST_STREAM or GOAWAY that ended it.
type outcome struct {
	status string
	reset  http2.ErrCode
	goaway bool
	body   []byte
}

// await reads frames until stream id is answered or reset.
func (r *h2Raw) await(id uint32) outcome {
	r.t.Helper()
	_ = r.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var o outcome
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			r.t.Fatalf("stream %d: %v", id, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = r.fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID == id {
				o.status = f.PseudoValue("status")
				if f.StreamEnded() {
					return o
				}
			}
		case *http2.DataFrame:
			if f.StreamID == id {
				o.body = append(o.body, f.Data()...)
				if f.StreamEnded() {
					return o
				}
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				o.reset = f.ErrCode
				return o
			}
		case *http2.GoAwayFrame:
			o.goaway, o.reset = true, f.ErrCode
			return o
		}
	}
}

func get(path string, extra ...string) []string {
	return append([]string{":method", "GET", ":scheme", "https", ":authority", "a.test", ":path", path}, extra...)
}

// TestHTTP2EdgeSafety: the tricks of the HTTP/1.1 edge-safety suite, in
// HTTP/2's terms, never reach the backend: malformed requests (a Host
// naming another host than :authority among them) are reset with
// PROTOCOL_ERROR, the treatment RFC 9113 §8.1.1 gives them, or answered
// 400 by the gateway's own checks; the connection goes on serving.
func TestHTTP2EdgeSafety(t *testing.T) {
	for _, kind := range transports {
		t.Run(kind, func(t *testing.T) {
			e := startH2Edge(t, kind, h2.Options{})
			r := e.raw(t)
			for _, tc := range []struct {
				name   string
				fields []string
				body   []byte
				status string // "" for a stream reset (or 400: x/net or the gateway may refuse it)
			}{
				{"duplicate :path", append(get("/a"), ":path", "/admin"), nil, ""},
				{"pseudo after regular", []string{":method", "GET", ":scheme", "https", "x-a", "1", ":authority", "a.test", ":path", "/a"}, nil, ""},
				{"unknown pseudo", get("/a", ":foo", "bar"), nil, ""},
				{"missing :path", []string{":method", "GET", ":scheme", "https", ":authority", "a.test"}, nil, ""},
				{"upper-case name", get("/a", "X-Up", "1"), nil, ""},
				{"connection field", get("/a", "connection", "keep-alive"), nil, ""},
				{"transfer-encoding", get("/a", "transfer-encoding", "chunked"), []byte("3\r\nabc\r\n0\r\n\r\n"), ""},
				{"te other than trailers", get("/a", "te", "gzip"), nil, ""},
				{"CRLF in a value", get("/a", "x-a", "b\r\nx-injected: 1"), nil, ""},
				{"CRLF in :path", get("/a HTTP/1.1\r\nx-injected: 1\r\nx-b: /"), nil, ""},
				{"space in :method", append([]string{":method", "GET /b"}, get("/a")[2:]...), nil, ""},
				{"length longer than the data", get("/a", "content-length", "10"), []byte("abc"), ""},
				{"length with no body at all", append([]string{":method", "POST"}, append(get("/a")[2:], "content-length", "10")...), nil, "400"},
				{"Host and :authority differ", get("/a", "host", "evil.test"), nil, ""},
				{"Host and :authority differ in case", get("/a", "host", "A.TEST"), nil, ""},
				{"two Host fields", get("/a", "host", "a.test", "host", "evil.test"), nil, ""},
				{"userinfo in :authority", []string{":method", "GET", ":scheme", "https", ":authority", "u@evil.test", ":path", "/a"}, nil, ""},
				{"two content-lengths", get("/a", "content-length", "3", "content-length", "3"), []byte("abc"), "400"},
				{"no authority, no host", []string{":method", "GET", ":scheme", "https", ":path", "/a"}, nil, "400"},
				{"double-encoded dot segments", get("/api/order/%252e%252e/%252e%252e/v1/order/create"), nil, "400"},
				{"encoded CRLF in the path", get("/a%0d%0aX:1"), nil, "400"},
				{"..; segment", get("/..;/admin"), nil, "400"},
				{"absolute :path", get("https://evil.test/a"), nil, ""},
			} {
				n := e.up.Count()
				o := r.await(r.send(tc.body, tc.fields...))
				switch {
				case o.goaway:
					t.Fatalf("%s: the connection was closed (%v)", tc.name, o.reset)
				case tc.status == "" && o.reset == 0 && o.status != "400":
					t.Fatalf("%s: answered %s %q, want a stream reset (or 400)", tc.name, o.status, o.body)
				case tc.status != "" && o.status != tc.status:
					t.Fatalf("%s: status %q (reset %v), want %s", tc.name, o.status, o.reset, tc.status)
				case tc.status != "" && !bytes.Contains(o.body, []byte(`"code":400`)):
					t.Fatalf("%s: body %q, want the gateway's JSON error", tc.name, o.body)
				}
				if e.up.Count() != n {
					last, _ := e.up.Last()
					t.Fatalf("%s reached the backend:\n%s", tc.name, last.Head)
				}
			}
			// Same :authority and Host: one request, served.
			if o := r.await(r.send(nil, get("/fine", "host", "a.test")...)); o.status != "200" {
				t.Fatalf("a well-formed request after the tricks: %+v", o)
			}
			for _, req := range e.up.Requests() {
				if strings.Contains(strings.ToLower(req.Head), "injected") || strings.Contains(req.Head, "evil") {
					t.Fatalf("backend got:\n%s", req.Head)
				}
			}
		})
	}
}

// TestHTTP2Settings: what the gateway advertises is what it was told.
func TestHTTP2Settings(t *testing.T) {
	e := startH2Edge(t, "netpoll", h2.Options{MaxConcurrentStreams: 7, MaxHeaderListBytes: 4096, StreamWindow: 32 << 10})
	r := e.raw(t)
	_ = r.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		f, err := r.fr.ReadFrame()
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
	for _, kind := range transports {
		t.Run(kind, func(t *testing.T) {
			e := startH2Edge(t, kind, h2.Options{})
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)

			sent, cut, err := testutil.H2RapidReset(e.g.Addr, &tls.Config{ServerName: "a.test", RootCAs: e.ca.Pool()}, "a.test", "/flood", 20_000)
			if err != nil {
				t.Fatal(err)
			}
			if !cut {
				t.Fatalf("after %d reset streams the connection is still open", sent)
			}
			served := e.up.Count()
			if served > 1000 {
				t.Fatalf("%d of %d reset streams reached the backend", served, sent)
			}
			counted := int64(0)
			for reason, n := range e.srv.Stats().Refused {
				if strings.HasSuffix(reason, "early_resets") { // ours, or x/net's conn_ENHANCE_YOUR_CALM_too_many_early_resets
					counted += n
				}
			}
			if counted == 0 {
				t.Fatalf("no flood refusal counted: %+v", e.srv.Stats())
			}
			var after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&after)
			if grown := int64(after.HeapInuse) - int64(before.HeapInuse); grown > 64<<20 {
				t.Fatalf("heap grew %d MiB", grown>>20)
			}
			t.Logf("%d streams sent, %d reached the backend, refusals %v", sent, served, e.srv.Stats().Refused)
			// Others are still served.
			resp, body := e.do(t, e.client(true), "GET", "/after", nil, nil)
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
	for _, kind := range transports {
		t.Run(kind, func(t *testing.T) {
			e := startH2Edge(t, kind, h2.Options{MaxHeaderListBytes: 8192, IdleTimeout: time.Second})

			// Large: fields of 4 KiB each, 16 KiB per frame, up to 64 MiB.
			r := e.raw(t)
			if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block(get("/c")...)}); err != nil {
				t.Fatal(err)
			}
			var frag []byte
			for range 4 {
				frag = append(frag, r.block("x-pad", strings.Repeat("p", 4000))...)
			}
			written := 0
			_ = r.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
			for written < 64<<20 {
				if err := r.fr.WriteContinuation(1, false, frag); err != nil {
					break
				}
				written += len(frag)
			}
			if written >= 64<<20 {
				t.Fatalf("64 MiB of CONTINUATION frames were taken")
			}
			t.Logf("large CONTINUATION frames: the connection ended after %d KiB written (socket buffers included)", written>>10)

			// Empty, trickled: the idle timeout ends the connection.
			r = e.raw(t)
			if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block(get("/c")...)}); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			for time.Since(start) < 10*time.Second {
				_ = r.conn.SetWriteDeadline(time.Now().Add(time.Second))
				if err := r.fr.WriteContinuation(1, false, nil); err != nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if d := time.Since(start); d >= 10*time.Second {
				t.Fatalf("empty CONTINUATION frames kept the connection %v", d)
			}
			if e.up.Count() != 0 {
				t.Fatalf("the backend got %d requests", e.up.Count())
			}
			resp, _ := e.do(t, e.client(true), "GET", "/after", nil, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("after the floods: %d", resp.StatusCode)
			}
		})
	}
}

// TestHTTP2Drain: a shutdown lets a request in flight on an h2 connection
// finish, tells the client to go away, and returns once it is answered.
func TestHTTP2Drain(t *testing.T) {
	for _, kind := range transports {
		t.Run(kind, func(t *testing.T) {
			slow := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(400 * time.Millisecond)
				_, _ = io.WriteString(w, "slow")
			})}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = slow.Serve(ln) }()
			t.Cleanup(func() { _ = slow.Close() })

			e := startH2EdgeOn(t, kind, h2.Options{}, oneService, ln.Addr().String())
			c := e.client(true)
			if resp, _ := e.do(t, c, "GET", "/warm", nil, nil); resp.ProtoMajor != 2 {
				t.Fatal("not h2")
			}
			done := make(chan string, 1)
			go func() {
				resp, body := e.do(t, c, "GET", "/inflight", nil, nil)
				done <- fmt.Sprint(resp.StatusCode, " ", string(body))
			}()
			time.Sleep(100 * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			if err := e.g.Transport.Shutdown(ctx); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
			if got := <-done; got != "200 slow" {
				t.Fatalf("the request in flight got %q", got)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("shutdown took %v", d)
			}
			if n := e.srv.Conns(); n != 0 {
				t.Fatalf("%d h2 connections left", n)
			}
		})
	}
}

// TestHTTP2MaxConns: h2 connections count against client.max_conns on
// every transport; one past it is closed.
func TestHTTP2MaxConns(t *testing.T) {
	for _, kind := range transports {
		t.Run(kind, func(t *testing.T) {
			e := startH2EdgeOn(t, kind, h2.Options{}, h2Routes, "", func(o *Options) { o.MaxConns = 2 })
			var open []*h2Raw
			for range 2 {
				r := e.raw(t)
				if o := r.await(r.send(nil, get("/ok")...)); o.status != "200" {
					t.Fatalf("within the limit: %+v", o)
				}
				open = append(open, r)
			}
			conn, err := tls.Dial("tcp", e.g.Addr, &tls.Config{ServerName: "a.test", RootCAs: e.ca.Pool(), NextProtos: []string{"h2"}})
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

// TestFidelityH2 is the fidelity suite's generator run over HTTP/2 beside
// HTTP/1.1: for every generated request h2 can carry (lower-case names,
// no connection-specific fields), what the backend receives over h2 is
// what it receives over HTTP/1.1 — the same request line and the same
// fields, their order aside — and a request HTTP/1.1 refuses is refused
// over h2 too (400, or a stream reset where x/net is stricter).
func TestFidelityH2(t *testing.T) {
	cases := 1500
	if testing.Short() {
		cases = 100
	}
	e := startH2Edge(t, "netpoll", h2.Options{})
	r := e.raw(t)
	rnd := rand.New(rand.NewPCG(7, 7))
	carried, refusedBoth, stricter := 0, 0, 0
	for i := range cases {
		method, target, fields := genRequest(rnd)
		if !h2Carries(fields) {
			continue
		}
		carried++
		// Over HTTP/1.1, through the same TLS listener.
		before := e.up.Count()
		st1, req1 := e.h1Case(t, method, target, fields)
		var up1 testutil.RawRequest
		if e.up.Count() > before {
			up1 = req1
		}
		// Over h2.
		hf := []string{":method", method, ":scheme", "https", ":authority", "api.example.com", ":path", target}
		for _, f := range fields {
			hf = append(hf, strings.ToLower(f[0]), f[1])
		}
		var body []byte
		if method == "POST" || method == "PUT" {
			body = []byte("b=1")
			hf = append(hf, "content-length", "3")
		}
		before = e.up.Count()
		o := r.await(r.send(body, hf...))
		if o.goaway {
			t.Fatalf("case %d: the connection was closed", i)
		}
		forwarded2 := e.up.Count() > before
		switch {
		case up1.Head == "" && forwarded2:
			last, _ := e.up.Last()
			t.Fatalf("case %d: %s %s %q: refused over HTTP/1.1 (%d), forwarded over h2:\n%s", i, method, target, fields, st1, last.Head)
		case up1.Head == "":
			refusedBoth++
		case !forwarded2:
			// x/net refuses a few targets HTTP/1.1 takes (it parses :path
			// as a URL): stricter is allowed, looser is not.
			if o.reset == 0 && o.status != "400" {
				t.Fatalf("case %d: %s %s: not forwarded over h2 yet answered %s", i, method, target, o.status)
			}
			stricter++
		default:
			up2, _ := e.up.Last()
			if d := sameForwarded(up1, up2); d != "" {
				t.Fatalf("case %d: %s %s %q: %s\nh1:\n%s\nh2:\n%s", i, method, target, fields, d, up1.Head, up2.Head)
			}
		}
	}
	t.Logf("%d of %d generated requests carried over h2: %d refused by both, %d refused over h2 only, the rest forwarded alike",
		carried, cases, refusedBoth, stricter)
}

// h2Carries reports whether HTTP/2 can carry the fields at all: no
// connection-specific field (x/net resets those), TE only as "trailers".
func h2Carries(fields [][2]string) bool {
	for _, f := range fields {
		switch strings.ToLower(f[0]) {
		case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
			return false
		case "te":
			if f[1] != "trailers" {
				return false
			}
		}
	}
	return true
}

// h1Case sends one request over TLS and HTTP/1.1; it returns the status
// and what the backend last received.
func (e *h2Edge) h1Case(t *testing.T, method, target string, fields [][2]string) (int, testutil.RawRequest) {
	t.Helper()
	c, err := e.dial(t, "a.test", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	raw, _ := fidelityRequest(method, target, fields)
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	var resp fasthttp.Response
	resp.SkipBody = method == "HEAD"
	if err := resp.Read(bufio.NewReader(c)); err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	last, _ := e.up.Last()
	return resp.StatusCode(), last
}

// sameForwarded compares two forwarded requests: request line and body
// exactly, fields as sets (names folded; the gateway's per-request values
// — trace, request id — set aside; cookie fields joined with "; ", as
// RFC 9113 §8.2.3 has an HTTP/2 request's cookies passed to HTTP/1.1).
func sameForwarded(a, b testutil.RawRequest) string {
	if a.Line() != b.Line() {
		return fmt.Sprintf("request line %q over h1, %q over h2", a.Line(), b.Line())
	}
	if !bytes.Equal(a.Body, b.Body) {
		return fmt.Sprintf("body %q over h1, %q over h2", a.Body, b.Body)
	}
	norm := func(r testutil.RawRequest) []string {
		var out, cookies []string
		for _, f := range r.Fields() {
			k, v, _ := strings.Cut(f, ":")
			k = strings.ToLower(k)
			switch k {
			case "traceparent", "x-request-id":
				continue
			case "cookie":
				cookies = append(cookies, strings.TrimSpace(v))
				continue
			}
			out = append(out, k+":"+strings.TrimSpace(v))
		}
		if len(cookies) > 0 {
			out = append(out, "cookie:"+strings.Join(cookies, "; "))
		}
		slices.Sort(out)
		return out
	}
	if fa, fb := norm(a), norm(b); !slices.Equal(fa, fb) {
		return fmt.Sprintf("fields %q over h1, %q over h2", fa, fb)
	}
	return ""
}

// TestHTTP2DrainSaysGoAway: once the gateway drains (SIGTERM's delay),
// an h2 client's next answer is followed by a GOAWAY, as an HTTP/1.1
// client's carries Connection: close.
func TestHTTP2DrainSaysGoAway(t *testing.T) {
	e := startH2Edge(t, "netpoll", h2.Options{})
	r := e.raw(t)
	if o := r.await(r.send(nil, get("/before")...)); o.status != "200" || o.goaway {
		t.Fatalf("before the drain: %+v", o)
	}
	e.g.GW.Drain()
	id := r.send(nil, get("/during")...)
	_ = r.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	answered, goaway := false, false
	for !answered || !goaway {
		f, err := r.fr.ReadFrame()
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
