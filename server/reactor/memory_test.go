package reactor_test

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/server"
)

// memSlack is what the test process itself may add between two
// samples (its client buffers, runtime caches, the race detector's
// shadow of new objects): far below what any of these attacks cost
// when the gateway buffers them, far above what a bounded connection
// costs.
const memSlack = 24 * testutil.MiB

// newTransportKind starts the named transport around h.
func newTransportKind(tb testing.TB, kind string, h server.Handler, o server.Options) (server.Transport, string) {
	tb.Helper()
	tr, err := server.NewTransport(kind, h, o)
	if err != nil {
		tb.Fatal(err)
	}
	return tr, gatewaytest.Serve(tb, tr)
}

// pushUntilBlocked writes junk to conn as fast as the socket takes it,
// until limit bytes went out or a write made no progress for stall. It
// returns the bytes written and whether the writes blocked.
func pushUntilBlocked(conn net.Conn, limit int64, stall time.Duration) (int64, bool) {
	buf := make([]byte, 256<<10)
	for i := range buf {
		buf[i] = 'x'
	}
	var sent int64
	for sent < limit {
		chunk := buf[:min(int64(len(buf)), limit-sent)]
		_ = conn.SetWriteDeadline(time.Now().Add(stall))
		n, err := conn.Write(chunk)
		sent += int64(n)
		if err != nil {
			var ne net.Error
			return sent, errors.As(err, &ne) && ne.Timeout()
		}
	}
	_ = conn.SetWriteDeadline(time.Time{})
	return sent, false
}

// TestStreamingWhileBusyIsBounded is the read-ahead cap: a client that
// keeps sending while its request is being served (a slow upstream or
// mock, or a client not reading its answer) must find the gateway's socket
// full, not the gateway's memory. Its bytes stay in the kernel's socket
// buffers until the handler wants them. The client pushes as fast as the
// socket takes bytes, up to 256 MiB, and stops once a write has made no
// progress for 300ms.
func TestStreamingWhileBusyIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes up to 256 MiB behind a busy request")
	}
	const limit = 256 * testutil.MiB
	// The first 16 KiB of a body go with its header: fasthttp waits for
	// 8 KiB of it before the handler runs.
	const first = 16 << 10
	cases := []struct {
		name, head string
	}{
		// The body of a request whose handler has not started reading it.
		{"unread body", fmt.Sprintf("POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", limit, strings.Repeat("x", first))},
		// Bytes after a request, while it is served: pipelined junk.
		{"bytes after request", "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"},
	}
	for _, kind := range gatewaytest.Transports {
		for _, tc := range cases {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				h := &npStub{slow: 2 * time.Second, started: make(chan struct{}, 1)}
				o := npOptions()
				o.MaxBodyBytes = 2 << 30
				o.BodyTimeout, o.WriteTimeout = 10*time.Second, 10*time.Second
				_, addr := newTransportKind(t, kind, h, o)
				conn := gatewaytest.Dial(t, addr)
				gatewaytest.Write(t, conn, tc.head)
				select {
				case <-h.started:
				case <-time.After(5 * time.Second):
					t.Fatal("handler never started")
				}
				before := testutil.SampleMem()
				start := time.Now()
				sent, blocked := pushUntilBlocked(conn, limit-first, 300*time.Millisecond)
				took := time.Since(start)
				after := testutil.SampleMem()
				t.Logf("%s: %d MiB accepted in %v before the socket filled (blocked=%v); live +%d KiB, RSS +%d KiB",
					kind, sent/testutil.MiB, took.Round(time.Millisecond), blocked,
					testutil.Grew(before.Live, after.Live)>>10, testutil.Grew(before.RSS, after.RSS)>>10)
				if !blocked {
					t.Errorf("%d MiB went in without the socket ever filling: the gateway reads ahead without bound", sent/testutil.MiB)
				}
				if d := testutil.Grew(before.Live, after.Live); d > memSlack {
					t.Errorf("live memory grew by %d MiB while the handler was busy", d/testutil.MiB)
				}
				if d := testutil.Grew(before.RSS, after.RSS); d > 2*memSlack {
					t.Errorf("RSS grew by %d MiB while the handler was busy", d/testutil.MiB)
				}
			})
		}
	}
}

// TestStreamingGiBThroughBusyHandler pushes a whole GiB body at a handler
// that is busy for two seconds before it reads: the client is held back by
// the full socket, then the body flows through the handler's reads, and
// the gateway's memory stays flat all along. It moves 2 GiB through
// loopback (about 7s under the race detector), so -short skips it.
func TestStreamingGiBThroughBusyHandler(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes a GiB through each transport")
	}
	const size = 1 << 30
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			h := &npStub{slow: 2 * time.Second, started: make(chan struct{}, 1)}
			o := npOptions()
			o.MaxBodyBytes = 2 << 30
			o.BodyTimeout, o.WriteTimeout = 60*time.Second, 60*time.Second
			_, addr := newTransportKind(t, kind, h, o)
			conn := gatewaytest.Dial(t, addr)
			gatewaytest.Write(t, conn, fmt.Sprintf("POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", size))
			buf := npPayload(256 << 10)
			sum := crc32.NewIEEE()
			// fasthttp waits for 8 KiB of the body before the handler runs.
			gatewaytest.Write(t, conn, string(buf[:16<<10]))
			_, _ = sum.Write(buf[:16<<10])
			select {
			case <-h.started:
			case <-time.After(5 * time.Second):
				t.Fatal("handler never started")
			}
			before := testutil.SampleMem()

			// Sample while the GiB goes through, without collecting
			// garbage: the peak is what the process really touched.
			var peakHeap, peakRSS atomic.Uint64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for {
					var m runtime.MemStats
					runtime.ReadMemStats(&m)
					if v := m.HeapInuse + m.StackInuse; v > peakHeap.Load() {
						peakHeap.Store(v)
					}
					if v := testutil.RSS(); v > peakRSS.Load() {
						peakRSS.Store(v)
					}
					select {
					case <-stop:
						return
					case <-tick.C:
					}
				}
			})
			start := time.Now()
			var heldFrom, heldTo time.Duration // the longest write
			for sent := 16 << 10; sent < size; {
				chunk := buf[:min(len(buf), size-sent)]
				_ = conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
				t0 := time.Since(start)
				n, err := conn.Write(chunk)
				if t1 := time.Since(start); t1-t0 > heldTo-heldFrom {
					heldFrom, heldTo = t0, t1
				}
				_, _ = sum.Write(chunk[:n])
				sent += n
				if err != nil {
					t.Fatalf("after %d bytes: %v", sent, err)
				}
			}
			took := time.Since(start)
			resp := gatewaytest.ReadAnswer(t, conn, bufio.NewReader(conn), false)
			close(stop)
			wg.Wait()
			gatewaytest.Check(t, resp, 200, fmt.Sprintf("POST /slow n=%d crc=%08x", size, sum.Sum32()))
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			t.Logf("%s: 1 GiB in %v, the client held back from %v to %v while the handler was busy; heap+stacks in use %d KiB before, peak %d KiB; RSS %d KiB before, peak %d KiB",
				kind, took.Round(time.Millisecond), heldFrom.Round(time.Millisecond), heldTo.Round(time.Millisecond),
				before.Live>>10, peakHeap.Load()>>10, before.RSS>>10, peakRSS.Load()>>10)
			if d := testutil.Grew(before.RSS, peakRSS.Load()); d > 4*memSlack {
				t.Errorf("RSS peaked %d MiB above where it started", d/testutil.MiB)
			}
		})
	}
}

// TestClaimedBodySizeIsNotAllocated opens a thousand connections that each
// claim an 8 MiB body and send three bytes of it. Body buffers grow with
// the bytes that arrive, so the gateway holds a few KiB per connection,
// not the 8 GiB the claims add up to.
func TestClaimedBodySizeIsNotAllocated(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 1,000 connections")
	}
	const (
		conns   = 1000
		batch   = 50
		claimed = 8 * testutil.MiB
		// perConn is the stated bound (docs/memory.md) for a connection
		// waiting for its body, with the client's side of the socket and
		// the test's own bookkeeping on top.
		perConn = 64 << 10
	)
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			h := &npStub{}
			o := npOptions()
			o.MaxConns = 2 * conns
			o.MaxBodyBytes, o.StreamBodyBytes = claimed, claimed
			o.HeaderTimeout, o.BodyTimeout = 30*time.Second, 30*time.Second
			tr, addr := newTransportKind(t, kind, h, o)
			head := fmt.Sprintf("POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\nabc", claimed)
			before := testutil.SampleMem()
			open := make([]net.Conn, 0, conns)
			defer func() {
				for _, c := range open {
					c.Close()
				}
			}()
			var after testutil.MemSample
			for len(open) < conns {
				for range batch {
					c, err := net.DialTimeout("tcp", addr, 5*time.Second)
					if err != nil {
						t.Fatal(err)
					}
					open = append(open, c)
					if _, err := c.Write([]byte(head)); err != nil {
						t.Fatal(err)
					}
				}
				// Let the server read what was sent, then check the
				// bound, early: the unfixed transports would need 8 GiB.
				testutil.Eventually(t, 10*time.Second, "the server to take the connections", func() bool { return tr.Conns() >= len(open) })
				time.Sleep(50 * time.Millisecond)
				after = testutil.SampleMem()
				if d := testutil.Grew(before.Live, after.Live); d > uint64(len(open))*perConn+memSlack {
					t.Fatalf("%d connections claiming %d MiB each hold %d MiB (%d KiB each)",
						len(open), claimed/testutil.MiB, d/testutil.MiB, d/uint64(len(open))>>10)
				}
			}
			d := testutil.Grew(before.Live, after.Live)
			t.Logf("%s: %d connections waiting for an %d MiB body: live +%d MiB (%d KiB per connection, client side included), RSS +%d MiB",
				kind, conns, claimed/testutil.MiB, d/testutil.MiB, d/conns>>10, testutil.Grew(before.RSS, after.RSS)/testutil.MiB)
			if h.calls.Load() != 0 {
				t.Fatalf("the handler ran %d times for bodies that never arrived", h.calls.Load())
			}
		})
	}
}

// bareLF lists header sections that end in a bare LF: there is no CRLF CRLF
// for the parser to wait for, so they must be refused at once, not held
// until the header timeout.
var bareLF = []struct{ name, raw string }{
	{"all bare LF", "GET / HTTP/1.1\nHost: a\n\n"},
	{"bare LF blank line", "GET / HTTP/1.1\r\nHost: a\r\n\n"},
	{"bare LF before CRLF blank line", "GET / HTTP/1.1\r\nHost: a\n\r\n"},
	{"bare LF, no fields", "GET / HTTP/1.0\n\n"},
	{"bare LF with a body", "POST / HTTP/1.1\nHost: a\nContent-Length: 2\n\nok"},
	// Whether a later CRLF CRLF is in the same segment must not change
	// the answer.
	{"bare LF then a request", "GET / HTTP/1.1\r\nHost: a\n\nGET /next HTTP/1.1\r\nHost: a\r\n\r\n"},
}

func TestBareLFHeaderSectionAnsweredAtOnce(t *testing.T) {
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			up := testutil.StartUpstream(t, "ok")
			g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}, Tweak: func(o *server.Options) {
				o.HeaderTimeout = 5 * time.Second
			}})
			for _, tc := range bareLF {
				t.Run(tc.name, func(t *testing.T) {
					start := time.Now()
					res := testutil.RawExchange(t, g.Addr, []byte(tc.raw), 2, 4*time.Second)
					took := time.Since(start)
					if len(res.Responses) != 1 || res.Responses[0].StatusCode() != 400 {
						t.Fatalf("got %v after %v, want one 400", res.Statuses(), took)
					}
					if !gatewaytest.HasJSONCode(res.Responses[0].Body(), "400") {
						t.Fatalf("body %q is not the JSON error shape", res.Responses[0].Body())
					}
					if !res.Closed {
						t.Fatal("connection left open")
					}
					// RawExchange waits 300ms for the close after the answer.
					if took > 1500*time.Millisecond {
						t.Fatalf("answered after %v, want at once (header timeout 5s)", took)
					}
				})
			}
			if n := up.Requests.Load(); n != 0 {
				t.Fatalf("%d requests reached the upstream", n)
			}

			// The same on a keep-alive connection after a good request.
			conn, err := net.DialTimeout("tcp", g.Addr, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Write([]byte("GET /first HTTP/1.1\r\nHost: a\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			if res := testutil.ReadResponses(t, conn, 1, 2*time.Second); len(res.Responses) != 1 || res.Responses[0].StatusCode() != 200 {
				t.Fatalf("first request: %v", res.Statuses())
			}
			start := time.Now()
			if _, err := conn.Write([]byte("GET /second HTTP/1.1\nHost: a\n\n")); err != nil {
				t.Fatal(err)
			}
			res := testutil.ReadResponses(t, conn, 1, 4*time.Second)
			if len(res.Responses) != 1 || res.Responses[0].StatusCode() != 400 || time.Since(start) > 1500*time.Millisecond {
				t.Fatalf("keep-alive bare LF: %v after %v, want a 400 at once", res.Statuses(), time.Since(start))
			}
		})
	}
}

// Bare LF inside a section that ends with CRLF CRLF is tolerated (RFC 9112
// §2.2), and blank lines in a body that arrives slowly are body bytes: none
// of it may be mistaken for a header section ending in a bare LF.
func TestBareLFCheckLeavesGoodRequestsAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("takes seconds")
	}
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			up := testutil.StartUpstream(t, "ok")
			g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}})
			conn, err := net.DialTimeout("tcp", g.Addr, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			steps := []struct {
				write string
				pause bool
			}{
				{"GET /lf-inside HTTP/1.1\r\nHost: a\nX-A: b\r\n\r\n", false},
				// A body with blank lines, sent in pieces.
				{"POST /slow-body HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\nab\n", true},
				{"\ncd\r\n\nef\n", false},
				// Pipelined: a whole request, then the next one's header,
				// then its body later.
				{"POST /p1 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nx\n\n" +
					"POST /p2 HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\n\r\n", true},
				{"y\n\n", true},
				{"\nzz", false},
				// A header split right inside its CRLF CRLF.
				{"GET /split HTTP/1.1\r\nHost: a\r\n", true},
				{"\r\n", false},
			}
			for _, s := range steps {
				if _, err := conn.Write([]byte(s.write)); err != nil {
					t.Fatal(err)
				}
				if s.pause {
					time.Sleep(150 * time.Millisecond)
				}
			}
			res := testutil.ReadResponses(t, conn, 5, 5*time.Second)
			if got := res.Statuses(); len(got) != 5 || strings.Count(fmt.Sprint(got), "200") != 5 {
				t.Fatalf("got %v, want five 200s", got)
			}
			want := []struct{ uri, body string }{
				{"/lf-inside", ""}, {"/slow-body", "ab\n\ncd\r\n\nef\n"}, {"/p1", "x\n\n"}, {"/p2", "y\n\n\nzz"}, {"/split", ""},
			}
			seen := up.Seen()
			if len(seen) != len(want) {
				t.Fatalf("upstream saw %d requests, want %d", len(seen), len(want))
			}
			for i, w := range want {
				if seen[i].URI != w.uri || string(seen[i].Body) != w.body {
					t.Fatalf("upstream request %d = %s %q, want %s %q", i, seen[i].URI, seen[i].Body, w.uri, w.body)
				}
			}
		})
	}
}
