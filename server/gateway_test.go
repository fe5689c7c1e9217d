package server_test

import (
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/server"
	"github.com/valyala/fasthttp"
)

func TestTraceAndForwardedHeaders(t *testing.T) {
	t.Parallel()
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := testutil.StartUpstream(t, "ok")
			g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}})
			tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
			raw := "GET /t HTTP/1.1\r\nHost: api.example.com\r\ntraceparent: " + tp + "\r\nX-Request-Id: abc-123\r\n\r\n" +
				"GET /u HTTP/1.1\r\nHost: api.example.com\r\n\r\n"
			res := testutil.RawExchange(t, g.Addr, []byte(raw), 2, 3*time.Second)
			if len(res.Responses) != 2 {
				t.Fatalf("%d responses", len(res.Responses))
			}
			r := res.Responses[0]
			got := string(r.Header.Peek("traceparent"))
			if !strings.HasPrefix(got, "00-4bf92f3577b34da6a3ce929d0e0e4736-") || strings.Contains(got, "00f067aa0ba902b7") {
				t.Fatalf("traceparent %q: want the client's trace id with the gateway's span", got)
			}
			if string(r.Header.Peek("X-Request-Id")) != "abc-123" {
				t.Fatalf("X-Request-Id %q", r.Header.Peek("X-Request-Id"))
			}
			seen := up.Seen()
			if seen[0].Header("traceparent") != got || seen[0].Header("X-Request-Id") != "abc-123" {
				t.Fatalf("upstream got traceparent %q id %q", seen[0].Header("traceparent"), seen[0].Header("X-Request-Id"))
			}
			if seen[0].Header("X-Real-IP") != "127.0.0.1" || seen[0].Header("X-Forwarded-For") != "127.0.0.1" {
				t.Fatalf("forwarding headers %v", seen[0].Headers)
			}
			// Without a traceparent the gateway creates one, and the
			// request id defaults to the trace id.
			r2 := res.Responses[1]
			tp2 := string(r2.Header.Peek("traceparent"))
			if len(tp2) != 55 || string(r2.Header.Peek("X-Request-Id")) != tp2[3:35] {
				t.Fatalf("created traceparent %q, request id %q", tp2, r2.Header.Peek("X-Request-Id"))
			}
		})
	}
}

func TestNotFoundAndHTTP10(t *testing.T) {
	cfg := `
services:
  up: {instances: [{addr: "${UP}"}]}
routes:
  - {name: api, match: {prefix: /api/}, service: up}
not_found: {status: 404, body: '{"code":404,"message":"no route"}'}
`
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := testutil.StartUpstream(t, "ok")
			g := gatewaytest.Start(t, cfg, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}})
			res := testutil.RawExchange(t, g.Addr, []byte("GET /nothing HTTP/1.1\r\nHost: a\r\n\r\n"), 1, 2*time.Second)
			if len(res.Responses) != 1 || res.Responses[0].StatusCode() != 404 ||
				string(res.Responses[0].Body()) != `{"code":404,"message":"no route"}` {
				t.Fatalf("not found: %v", res.Statuses())
			}
			if res.Closed {
				t.Fatal("a 404 must not close the connection")
			}
			res = testutil.RawExchange(t, g.Addr, []byte("GET /api/x HTTP/1.0\r\nHost: a\r\n\r\n"), 1, 2*time.Second)
			if len(res.Responses) != 1 || res.Responses[0].StatusCode() != 200 || !res.Closed {
				t.Fatalf("HTTP/1.0: %v closed=%v, want 200 then close", res.Statuses(), res.Closed)
			}
			// Without Host the gateway has nothing to route on nor to send
			// upstream: a client error, not an upstream one.
			res = testutil.RawExchange(t, g.Addr, []byte("GET /api/x HTTP/1.0\r\n\r\n"), 1, 2*time.Second)
			if len(res.Responses) != 1 || res.Responses[0].StatusCode() != 400 {
				t.Fatalf("HTTP/1.0 without Host: %v, want 400", res.Statuses())
			}
			res = testutil.RawExchange(t, g.Addr, []byte("GET /api/x HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\n\r\nGET /api/y HTTP/1.0\r\nHost: a\r\n\r\n"), 2, 2*time.Second)
			if len(res.Responses) != 2 {
				t.Fatalf("HTTP/1.0 keep-alive: %v", res.Statuses())
			}
		})
	}
}

// TestSwapUnderLoad swaps snapshots while clients run: every request must
// succeed, each on a complete snapshot.
func TestSwapUnderLoad(t *testing.T) {
	t.Parallel()
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			a := testutil.StartUpstream(t, "a")
			b := testutil.StartUpstream(t, "b")
			g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": a.Addr}})
			snaps := make([]*config.Snapshot, 2)
			for i, addr := range []string{a.Addr, b.Addr} {
				f, err := config.Parse("t", []byte(gatewaytest.OneService), func(string) (string, bool) { return addr, true })
				if err != nil {
					t.Fatal(err)
				}
				f.Defaults()
				if snaps[i], err = g.Compiler.Compile(f, "t"); err != nil {
					t.Fatal(err)
				}
			}
			var bad atomic.Int64
			var total atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					client := &fasthttp.HostClient{Addr: g.Addr}
					var req fasthttp.Request
					var resp fasthttp.Response
					req.SetRequestURI("http://x/load")
					for {
						select {
						case <-stop:
							return
						default:
						}
						if err := client.Do(&req, &resp); err != nil || resp.StatusCode() != 200 {
							bad.Add(1)
						}
						total.Add(1)
					}
				}()
			}
			for i := range 100 {
				g.GW.Swap(snaps[i%2])
				time.Sleep(5 * time.Millisecond)
			}
			close(stop)
			wg.Wait()
			if bad.Load() != 0 || total.Load() == 0 {
				t.Fatalf("%d of %d requests failed during swaps", bad.Load(), total.Load())
			}
			if a.Requests.Load() == 0 || b.Requests.Load() == 0 {
				t.Fatal("swaps did not move traffic between upstreams")
			}
		})
	}
}

func TestMaxConnsRefusesExcess(t *testing.T) {
	t.Parallel()
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := testutil.StartUpstream(t, "ok")
			g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}, Tweak: func(o *server.Options) { o.MaxConns = 2 }})
			conns := make([]interface{ Close() error }, 0, 2)
			for range 2 {
				conns = append(conns, dialAndServe(t, g.Addr))
			}
			res := testutil.RawExchange(t, g.Addr, []byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), 1, 2*time.Second)
			// Refused: closed at once (netpoll) or a 503 and a close
			// (fasthttp), never forwarded.
			switch {
			case !res.Closed:
				t.Fatal("a third connection was kept open with max_conns 2")
			case len(res.Responses) == 1 && res.Responses[0].StatusCode() != 503:
				t.Fatalf("a third connection got %d with max_conns 2", res.Responses[0].StatusCode())
			}
			if n := up.Requests.Load(); n != 2 {
				t.Fatalf("upstream saw %d requests, want the 2 of the held connections", n)
			}
			// Freeing a slot admits a new connection: the refusal was the
			// limit, not a broken gateway.
			conns[0].Close()
			deadline := time.Now().Add(3 * time.Second)
			for {
				r := testutil.RawExchange(t, g.Addr, []byte("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"), 1, time.Second)
				if len(r.Responses) == 1 && r.Responses[0].StatusCode() == 200 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("no connection admitted after one of the two closed")
				}
				time.Sleep(50 * time.Millisecond)
			}
			conns[1].Close()
		})
	}
}

// dialAndServe opens a connection and completes one request on it, so the
// transport counts it as open.
func dialAndServe(t *testing.T, addr string) interface{ Close() error } {
	t.Helper()
	conn, err := netDial(addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if r := testutil.ReadResponses(t, conn, 1, 2*time.Second); len(r.Responses) != 1 {
		t.Fatal("held connection not served")
	}
	return conn
}

// BenchmarkGatewayServe measures the gateway's own work for a proxied GET
// (strict checks, trace, routing, header rewriting, upstream exchange over
// a pooled connection, access-log record) without a client socket.
func BenchmarkGatewayServe(b *testing.B) {
	gw, req, resp, peer := benchGateway(b)
	b.ReportAllocs()
	for b.Loop() {
		serveBench(gw, req, resp, peer)
	}
}

func benchGateway(tb testing.TB) (*server.Gateway, *fasthttp.Request, *fasthttp.Response, netip.AddrPort) {
	up := testutil.StartQuietUpstream(tb, "ok")
	return oneServiceGateway(tb, up.Addr), &fasthttp.Request{}, &fasthttp.Response{}, netip.MustParseAddrPort("127.0.0.1:40000")
}

// oneServiceGateway is a Gateway on the oneService config with its
// instance at upAddr.
func oneServiceGateway(tb testing.TB, upAddr string) *server.Gateway {
	tb.Helper()
	f, err := config.Parse("b", []byte(gatewaytest.OneService), func(string) (string, bool) { return upAddr, true })
	if err != nil {
		tb.Fatal(err)
	}
	f.Defaults()
	snap, err := config.NewCompiler().Compile(f, "b")
	if err != nil {
		tb.Fatal(err)
	}
	return server.NewGateway(snap, nil)
}

var benchRaw = "GET /api/order/list?page=2 HTTP/1.1\r\nHost: api.example.com\r\nUser-Agent: bench\r\nAccept: application/json\r\n\r\n"

func serveBench(gw *server.Gateway, req *fasthttp.Request, resp *fasthttp.Response, peer netip.AddrPort) {
	req.Reset()
	resp.Reset()
	req.Header.DisableNormalizing()
	_ = req.Header.Read(bufioReader(benchRaw))
	c := pipeline.Acquire(req, resp)
	c.Peer = peer
	gw.Serve(c)
	pipeline.Release(c)
}

// TestHeaderCaseCannotSmuggle: header names are case-insensitive, so a
// client must not get hop-by-hop fields, a forged X-Forwarded-For or an
// internal header through by spelling them in lower case.
func TestHeaderCaseCannotSmuggle(t *testing.T) {
	t.Parallel()
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := testutil.StartUpstream(t, "ok")
			g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}})
			raw := "GET /h HTTP/1.1\r\nHost: a\r\nconnection: keep-alive, x-secret\r\nx-secret: 1\r\nupgrade: h2c\r\n" +
				"keep-alive: 5\r\nx-forwarded-for: 6.6.6.6\r\nx-real-ip: 6.6.6.6\r\nx-internal-role: admin\r\n" +
				"proxy-authorization: basic x\r\nte: trailers\r\nx-request-id: client-id\r\n\r\n"
			res := testutil.RawExchange(t, g.Addr, []byte(raw), 1, 3*time.Second)
			if len(res.Responses) != 1 || res.Responses[0].StatusCode() != 200 {
				t.Fatalf("%v", res.Statuses())
			}
			seen := up.Last().Headers
			for k, v := range seen {
				lk := strings.ToLower(k)
				switch lk {
				case "connection", "x-secret", "upgrade", "keep-alive", "proxy-authorization", "te", "x-internal-role":
					t.Errorf("%s: %s forwarded", k, v)
				case "x-forwarded-for", "x-real-ip":
					if v != "127.0.0.1" {
						t.Errorf("%s: %s forwarded, want the peer only", k, v)
					}
				}
			}
			n := 0
			for k := range seen {
				if strings.EqualFold(k, "X-Forwarded-For") {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d X-Forwarded-For fields reached the upstream: %v", n, seen)
			}
			if got := string(res.Responses[0].Header.Peek("X-Request-Id")); got != "client-id" {
				t.Errorf("lower-case x-request-id not honoured: %q", got)
			}
		})
	}
}

// TestCookieForwardedVerbatim: the gateway reads headers without making
// fasthttp re-serialize Cookie, so the upstream gets the client's bytes
// (quotes, odd pairs, two Cookie lines) exactly.
func TestCookieForwardedVerbatim(t *testing.T) {
	t.Parallel()
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := testutil.StartUpstream(t, "ok")
			g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}})
			raw := "GET /c HTTP/1.1\r\nHost: a\r\nCookie: sid=\"q 1\"; theme=dark\r\nX-Internal-A: x\r\n\r\n"
			res := testutil.RawExchange(t, g.Addr, []byte(raw), 1, 3*time.Second)
			if len(res.Responses) != 1 || res.Responses[0].StatusCode() != 200 {
				t.Fatalf("%v", res.Statuses())
			}
			if got := up.Last().Header("Cookie"); got != `sid="q 1"; theme=dark` {
				t.Fatalf("upstream Cookie %q, want the client's bytes", got)
			}
			if up.Last().Header("X-Internal-A") != "" {
				t.Fatal("internal header forwarded")
			}
		})
	}
}

func TestProcsFor(t *testing.T) {
	for _, c := range []struct {
		transport string
		workers   int
		want      int
	}{{"reactor", 2, 3}, {"netpoll", 1, 2}, {"fasthttp", 4, 4}} {
		f := &config.File{Transport: c.transport, Workers: c.workers}
		if got := server.ProcsFor(f); got != c.want || server.WorkersFor(f) != c.workers {
			t.Errorf("%s with %d workers: GOMAXPROCS %d, workers %d; want %d, %d", c.transport, c.workers, got, server.WorkersFor(f), c.want, c.workers)
		}
	}
	if f := (&config.File{Transport: "netpoll"}); server.WorkersFor(f) != server.DefaultProcs || server.ProcsFor(f) != server.DefaultProcs+1 {
		t.Errorf("workers 0: %d workers, GOMAXPROCS %d; want the runtime's %d, and one more", server.WorkersFor(f), server.ProcsFor(f), server.DefaultProcs)
	}
}
