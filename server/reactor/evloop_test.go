package reactor_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/server"
	"github.com/tollgate/tollgate/upstream"
	"github.com/valyala/fasthttp"
)

// loopStub serves requests on the reactor's event loop: /sleep parks the
// request on the loop's timers, /block leaves the loop for a blocking call,
// /up/ADDR proxies a GET to ADDR over a connection the loop dialed; the
// rest is answered at once.
type loopStub struct {
	wait     time.Duration
	upWait   time.Duration // deadline of the /up/ exchange
	blocking atomic.Int64  // requests inside their blocking call
	loops    atomic.Int64  // requests that were given a loop
}

func (s *loopStub) Serve(c *pipeline.Ctx) bool {
	return s.serveOn(c.Req, c.Resp, c.Loop)
}

func (s *loopStub) serveOn(req *fasthttp.Request, resp *fasthttp.Response, loop pipeline.Loop) bool {
	target := req.Header.RequestURI()
	if loop != nil {
		s.loops.Add(1)
	}
	switch {
	case bytes.Equal(target, []byte("/spin")) && loop != nil:
		// A millisecond of work on the loop itself.
		for start := time.Now(); time.Since(start) < time.Millisecond; {
		}
	case bytes.Equal(target, []byte("/tid")) && loop != nil:
		// The OS thread the request ran on, after a blocking call.
		loop.Block(nil, pipeline.BlockingFunc(func() { time.Sleep(100 * time.Microsecond) }))
		resp.SetBodyString(strconv.Itoa(syscall.Gettid()))
		return false
	case bytes.Equal(target, []byte("/loop")) && loop != nil:
		resp.SetBodyString(fmt.Sprintf("loop %d", loop.ID()))
		return false
	case bytes.Equal(target, []byte("/sleep")) && loop != nil:
		loop.Sleep(nil, s.wait)
	case bytes.Equal(target, []byte("/block")) && loop != nil:
		loop.Block(nil, pipeline.BlockingFunc(func() {
			s.blocking.Add(1)
			time.Sleep(s.wait) // a bounded call that blocks its thread
			s.blocking.Add(-1)
		}))
	case bytes.HasPrefix(target, []byte("/up/")) && loop != nil:
		conn, err := loop.Dial(string(target[4:]), time.Second)
		if err != nil {
			resp.SetStatusCode(fasthttp.StatusBadGateway)
			resp.SetBodyString(err.Error())
			return false
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(s.upWait))
		if _, err := io.WriteString(conn, "GET /x HTTP/1.1\r\nHost: up\r\n\r\n"); err != nil {
			resp.SetStatusCode(fasthttp.StatusBadGateway)
			return false
		}
		var up fasthttp.Response
		if err := up.Read(bufio.NewReader(conn)); err != nil {
			resp.SetStatusCode(fasthttp.StatusGatewayTimeout)
			resp.SetBodyString(err.Error())
			return false
		}
		resp.SetBody(up.Body())
		return false
	}
	resp.SetBodyString("ok " + string(target))
	return false
}

func (s *loopStub) ServeError(err error, c *pipeline.Ctx) {
	c.Resp.SetStatusCode(codec.Status(err))
}

// TestEventLoopWaitsHoldNoLoop: with one loop, requests parked on a timer
// and requests in a blocking call leave the loop free for the others: the
// quick requests sent after them are all answered before any of them.
func TestEventLoopWaitsHoldNoLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("takes seconds")
	}
	h := &loopStub{wait: 3 * time.Second}
	o := npOptions()
	o.Workers = 1
	_, addr := npServe(t, h, o)

	type answer struct {
		path string
		at   time.Time
		err  error
	}
	slow := make(chan answer, 4)
	for _, path := range []string{"/sleep", "/block", "/sleep", "/block"} {
		conn := gatewaytest.Dial(t, addr)
		gatewaytest.Write(t, conn, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
		go func() {
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			var resp fasthttp.Response
			err := resp.Read(bufio.NewReader(conn))
			if err == nil && resp.StatusCode() != 200 {
				err = fmt.Errorf("status %d", resp.StatusCode())
			}
			slow <- answer{path, time.Now(), err}
		}()
	}
	testutil.Eventually(t, 5*time.Second, "both blocking calls to start", func() bool { return h.blocking.Load() == 2 })

	conn := gatewaytest.Dial(t, addr)
	br := bufio.NewReader(conn)
	for i := range 50 {
		gatewaytest.Write(t, conn, fmt.Sprintf("GET /quick/%d HTTP/1.1\r\nHost: x\r\n\r\n", i))
		gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200, fmt.Sprintf("ok /quick/%d", i))
	}
	quickDone := time.Now()
	if h.blocking.Load() != 2 {
		t.Fatalf("the quick requests waited for the blocking ones")
	}
	for range 4 {
		a := <-slow
		if a.err != nil {
			t.Fatalf("%s: %v", a.path, a.err)
		}
		if a.at.Before(quickDone) {
			t.Fatalf("%s answered before the quick requests were done", a.path)
		}
	}
	if got := h.loops.Load(); got != 54 {
		t.Fatalf("requests served on a loop: %d, want 54", got)
	}
}

// TestEventLoopUpstreamOnTheLoop: a connection the loop dials reaches its
// backend, fails fast when nothing listens, and times out by the loop's
// timers when the backend never answers.
func TestEventLoopUpstreamOnTheLoop(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var req fasthttp.Request
				if req.Read(bufio.NewReader(c)) == nil {
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nfrom-up!")
				}
			}()
		}
	}()
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Close() // accepted by the kernel, never answered
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	h := &loopStub{upWait: time.Second}
	o := npOptions()
	o.Workers = 1
	_, addr := npServe(t, h, o)
	conn := gatewaytest.Dial(t, addr)
	br := bufio.NewReader(conn)

	gatewaytest.Write(t, conn, "GET /up/"+up.Addr().String()+" HTTP/1.1\r\nHost: x\r\n\r\n")
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200, "from-up!")

	// By name: looked up off the loop, then from the transport's cache.
	_, port, _ := net.SplitHostPort(up.Addr().String())
	for range 2 {
		gatewaytest.Write(t, conn, "GET /up/localhost:"+port+" HTTP/1.1\r\nHost: x\r\n\r\n")
		gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, br, false), 200, "from-up!")
	}

	gatewaytest.Write(t, conn, "GET /up/"+closedAddr+" HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp := gatewaytest.ReadAnswer(t, conn, br, false); resp.StatusCode() != 502 || !bytes.Contains(resp.Body(), []byte("refused")) {
		t.Fatalf("dial to a closed port: %d %s", resp.StatusCode(), resp.Body())
	}

	start := time.Now()
	gatewaytest.Write(t, conn, "GET /up/"+hang.Addr().String()+" HTTP/1.1\r\nHost: x\r\n\r\n")
	resp := gatewaytest.ReadAnswer(t, conn, br, false)
	if resp.StatusCode() != 504 || !bytes.Contains(resp.Body(), []byte("timeout")) {
		t.Fatalf("hanging backend: %d %s", resp.StatusCode(), resp.Body())
	}
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Fatalf("hanging backend answered after %v, before its 1s deadline", took)
	}
}

// TestTransportNamesAgree: every transport a config may name starts, and
// a name the transports do not know is refused when the config is read.
func TestTransportNamesAgree(t *testing.T) {
	for _, kind := range []string{"reactor", "netpoll", "netpoll-dispatch", "fasthttp", "eventloop"} {
		f, err := config.Parse("t.yaml", []byte("transport: "+kind+"\n"+gatewaytest.OneService), func(k string) (string, bool) {
			return "127.0.0.1:1", k == "UP"
		})
		if err == nil {
			f.Defaults()
			err = f.Validate("t.yaml")
		}
		_, terr := server.NewTransport(kind, &loopStub{}, npOptions())
		if (err == nil) != (terr == nil) || kind == "eventloop" && err == nil {
			t.Fatalf("%s: config says %v, transports say %v", kind, err, terr)
		}
	}
}

// TestEventLoopStopEndsWaitingRequests: when a drain runs out of time, the
// loops stop and a request still waiting for its backend is ended then,
// not when its own (much later) deadline passes.
func TestEventLoopStopEndsWaitingRequests(t *testing.T) {
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Close()
	h := &loopStub{upWait: 30 * time.Second}
	o := npOptions()
	o.Workers = 1
	tr, addr, served := npStart(t, h, o)
	conn := gatewaytest.Dial(t, addr)
	gatewaytest.Write(t, conn, "GET /up/"+hang.Addr().String()+" HTTP/1.1\r\nHost: x\r\n\r\n")
	testutil.Eventually(t, 5*time.Second, "the request to reach its backend", func() bool { return h.loops.Load() == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := tr.Shutdown(ctx); err == nil {
		t.Fatal("Shutdown reported every request done while one waited for its backend")
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.Copy(io.Discard, conn) // the answer, if any, then EOF
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("the waiting request ended %v after the drain gave up", took)
	}
	select {
	case <-served:
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
	if tr.Conns() != 0 {
		t.Fatalf("%d connections left open", tr.Conns())
	}
}

// TestEventLoopDrainWaitsForABlockingCall: a drain lets a request whose
// blocking call is under way finish: the call's goroutine hands the fiber
// back to its loop, which is still there to answer.
func TestEventLoopDrainWaitsForABlockingCall(t *testing.T) {
	h := &loopStub{wait: 300 * time.Millisecond}
	o := npOptions()
	o.Workers = 1
	tr, addr, served := npStart(t, h, o)
	conn := gatewaytest.Dial(t, addr)
	gatewaytest.Write(t, conn, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
	testutil.Eventually(t, 5*time.Second, "the blocking call to start", func() bool { return h.blocking.Load() == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, conn, bufio.NewReader(conn), false), 200, "ok /block")
	select {
	case <-served:
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
}

// TestEventLoopUpstreamPoolFullParks: with more requests in flight on a
// loop than the service allows connections, the extra ones wait on the
// loop for a connection to be handed over, without holding the loop (were
// they to block it, nobody could hand one back and they would fail after
// the 20 ms wait). The backend never sees more connections than allowed.
func TestEventLoopUpstreamPoolFullParks(t *testing.T) {
	var inflight, peak atomic.Int64
	upAddr, stop := testutil.StartHandler(t, func(ctx *fasthttp.RequestCtx) {
		n := inflight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(2 * time.Millisecond)
		inflight.Add(-1)
		ctx.SetBodyString("ok")
	})
	defer stop()
	cfg := `
services:
  up:
    instances: [{addr: "${UP}"}]
    max_conns: 3
routes:
  - name: all
    match: {prefix: /}
    service: up
`
	g := gatewaytest.Start(t, cfg, gatewaytest.Options{Vars: map[string]string{"UP": upAddr}, Tweak: func(o *server.Options) { o.Workers = 1 }})
	// 8 clients for 3 connections: a waiter waits about two exchanges of
	// 2 ms each. (With 12, three exchanges under the race detector on a
	// loaded machine came close to the 20 ms wait, and a CI run went over.)
	const clients, each = 8, 20
	// A waiter may still run out its 20 ms on a loaded machine under the
	// race detector: such a 503 is allowed when the request did wait that
	// long. Blocking the loop instead would fail the waiters wholesale.
	var busy atomic.Int64
	errs := make(chan error, clients)
	for range clients {
		go func() {
			conn, err := net.Dial("tcp", g.Addr)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			br := bufio.NewReader(conn)
			for i := range each {
				sent := time.Now()
				if _, err := fmt.Fprintf(conn, "GET /p/%d HTTP/1.1\r\nHost: x\r\n\r\n", i); err != nil {
					errs <- err
					return
				}
				var resp fasthttp.Response
				if err := resp.Read(br); err != nil {
					errs <- err
					return
				}
				switch took := time.Since(sent); {
				case resp.StatusCode() == 200:
				case resp.StatusCode() == 503 && took >= 20*time.Millisecond:
					busy.Add(1)
				default:
					errs <- fmt.Errorf("status %d after %v: %s", resp.StatusCode(), took, resp.Body())
					return
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := busy.Load(); n > clients*each/10 {
		t.Fatalf("%d of %d requests ran out their wait for a connection", n, clients*each)
	}
	if p := peak.Load(); p > 3 {
		t.Fatalf("the backend saw %d requests at once, the service allows 3 connections", p)
	}
}

// TestLoopPoolReuse: the event loops' upstream pools keep connections
// alive between requests, send an idempotent request again on a new
// connection when a kept one turns out closed by the backend, do not
// send a request on one whose close the loop has seen, and close those
// idle past idle_conn.
func TestLoopPoolReuse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted, served atomic.Int64
	closeAfter := atomic.Int64{} // answers per connection before the backend closes it (0: never)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for n := int64(1); ; n++ {
					var req fasthttp.Request
					if err := req.Read(br); err != nil {
						return
					}
					served.Add(1)
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
					if k := closeAfter.Load(); k > 0 && n >= k {
						return // closed without saying so
					}
				}
			}()
		}
	}()
	yaml := strings.Replace(gatewaytest.OneService, "    timeouts:", "    idle_conn: 300ms\n    timeouts:", 1)
	g := gatewaytest.Start(t, yaml, gatewaytest.Options{Vars: map[string]string{"UP": ln.Addr().String()}})
	get := func(method string) int {
		t.Helper()
		var req fasthttp.Request
		var resp fasthttp.Response
		req.SetRequestURI("http://" + g.Addr + "/x")
		req.Header.SetMethod(method)
		if err := fasthttp.DoTimeout(&req, &resp, 3*time.Second); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode()
	}
	for range 5 {
		if st := get("GET"); st != 200 {
			t.Fatalf("status %d", st)
		}
	}
	if n := accepted.Load(); n != 1 {
		t.Fatalf("5 requests took %d upstream connections, want 1 kept alive", n)
	}

	// The backend closes each connection right after its answer: the next
	// request finds it closed — seen by the loop (not used), or not yet
	// (a GET goes again on a new one).
	closeAfter.Store(1)
	for i := range 20 {
		if st := get("GET"); st != 200 {
			t.Fatalf("GET %d after a silent close: %d", i, st)
		}
	}
	time.Sleep(50 * time.Millisecond) // the loop sees the last close
	if st := get("POST"); st != 200 {
		t.Fatalf("POST on a pool whose connection was closed: %d", st)
	}

	// Idle past idle_conn: closed by the sweep.
	closeAfter.Store(0)
	get("GET")
	svc := upstream.ServicesOf(g.GW.Snapshot().Env())["up"]
	deadline := time.Now().Add(3 * time.Second)
	for svc.Instances()[0].Status().Conns > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d upstream connections still open after idle_conn", svc.Instances()[0].Status().Conns)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fibersAlive counts the event loops' fibers, busy or free, from the
// process's goroutine stacks.
func fibersAlive() int {
	buf := make([]byte, 8<<20)
	return bytes.Count(buf[:runtime.Stack(buf, true)], []byte("server/reactor.(*fiber).body("))
}

// TestEventLoopKeepsFibersForTheNextBurst: the fibers a burst needed are
// kept while requests keep coming, past fiberIdle, so that the next burst
// does not create them again; once requests stop they are retired, and
// the goroutine count falls back.
func TestEventLoopKeepsFibersForTheNextBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the fibers' idle time")
	}
	upAddr, _ := testutil.StartHandler(t, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/slow" {
			time.Sleep(100 * time.Millisecond)
		}
		ctx.SetBodyString("ok")
	})
	g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Vars: map[string]string{"UP": upAddr}, Tweak: func(o *server.Options) { o.Workers = 1 }})
	client := &fasthttp.Client{}
	get := func(path string) error {
		var req fasthttp.Request
		var resp fasthttp.Response
		req.SetRequestURI("http://" + g.Addr + path)
		if err := client.DoTimeout(&req, &resp, 3*time.Second); err != nil {
			return err
		}
		if resp.StatusCode() != 200 {
			return fmt.Errorf("%s: status %d", path, resp.StatusCode())
		}
		return nil
	}
	if err := get("/fast"); err != nil {
		t.Fatal(err)
	}
	base := fibersAlive()

	const burst = 12
	errs := make(chan error, burst)
	for range burst {
		go func() { errs <- get("/slow") }()
	}
	for range burst {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	peak := fibersAlive()
	if peak < base+burst-1 {
		t.Fatalf("%d fibers after a burst of %d requests, %d before", peak, burst, base)
	}
	// Steady traffic, one request in flight at a time, for twice fiberIdle.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if err := get("/fast"); err != nil {
			t.Fatal(err)
		}
	}
	if n := fibersAlive(); n < peak {
		t.Fatalf("%d fibers left of the burst's %d under steady traffic: the next burst creates them again", n, peak)
	}
	// No more requests: retired after fiberIdle.
	deadline := time.Now().Add(5 * time.Second)
	for n := fibersAlive(); n > 0; n = fibersAlive() {
		if time.Now().After(deadline) {
			t.Fatalf("%d fibers still alive 5 s after the last request", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestEventLoopsWaitOnTheirOwn: with two loops, each waiting in its own
// epoll_pwait, deadlines still wake them (requests parked on a timer are
// answered after their wait, not never) and a request that left its loop
// for a blocking call comes back and is answered.
func TestEventLoopsWaitOnTheirOwn(t *testing.T) {
	h := &loopStub{wait: 150 * time.Millisecond}
	o := npOptions()
	o.Workers = 2
	_, addr := npServe(t, h, o)

	start := time.Now()
	errs := make(chan error, 8)
	for i := range 8 {
		path := "/sleep"
		if i%2 == 1 {
			path = "/block"
		}
		go func() {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := conn.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
				errs <- err
				return
			}
			var resp fasthttp.Response
			err = resp.Read(bufio.NewReader(conn))
			if err == nil && resp.StatusCode() != 200 {
				err = fmt.Errorf("%s: status %d", path, resp.StatusCode())
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took < 150*time.Millisecond || took > 3*time.Second {
		t.Fatalf("8 requests waiting 150 ms took %v", took)
	}
}

// npServeOneLoop serves h on one event loop run as the gateway runs it,
// with a P beyond the loop (server.ProcsFor), until the test ends.
func npServeOneLoop(t *testing.T, h server.Handler) string {
	o := npOptions()
	o.Workers = 1
	old := runtime.GOMAXPROCS(o.Workers + 1)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
	_, addr := npServe(t, h, o)
	return addr
}

// TestEventLoopLeavesGoroutinesAProc: run as the gateway runs it (one P
// more than its loops, server.ProcsFor), a loop kept busy does not hold up
// the goroutines waiting for their sockets — the admin listener, health
// probes, Redis replies: a round trip on a connection of this process's
// own is answered within a couple of milliseconds, not at the runtime
// monitor's next look (up to 10 ms; 5–7 ms median measured for /healthz
// with GOMAXPROCS equal to the loops).
func TestEventLoopLeavesGoroutinesAProc(t *testing.T) {
	addr := npServeOneLoop(t, &loopStub{})

	// The loop busy: 16 clients asking for a millisecond of its work each,
	// again and again.
	stop := make(chan struct{})
	var clients sync.WaitGroup
	for range 16 {
		conn := gatewaytest.Dial(t, addr)
		clients.Add(1)
		go func() {
			defer clients.Done()
			br := bufio.NewReader(conn)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := io.WriteString(conn, "GET /spin HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
					return
				}
				var resp fasthttp.Response
				if resp.Read(br) != nil {
					return
				}
			}
		}()
	}
	defer func() { close(stop); clients.Wait() }()

	// An echo server and its client, both goroutines of this process.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	echo := gatewaytest.Dial(t, ln.Addr().String())
	time.Sleep(100 * time.Millisecond) // the loop is busy by now
	var trips []time.Duration
	var b [1]byte
	for range 40 {
		start := time.Now()
		if _, err := echo.Write(b[:]); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(echo, b[:]); err != nil {
			t.Fatal(err)
		}
		trips = append(trips, time.Since(start))
		time.Sleep(2 * time.Millisecond)
	}
	slices.Sort(trips)
	if median := trips[len(trips)/2]; median > 2*time.Millisecond {
		t.Fatalf("round trips of a goroutine beside a busy loop: median %v (all: %v); want under 2ms", median, trips)
	}
}

// TestEventLoopKeepsItsThread: run as the gateway runs it (a P beyond its
// loops), a loop's requests all run on one OS thread, even with every P
// kept busy by goroutines the runtime preempts and moves, and after a
// blocking call that ran on another goroutine. Unlocked, a loop preempted
// by the runtime's monitor was resumed on whichever thread was free: 4
// threads over these 40 requests.
func TestEventLoopKeepsItsThread(t *testing.T) {
	if testing.Short() {
		t.Skip("watches the loop for seconds")
	}
	addr := npServeOneLoop(t, &loopStub{})

	stop := make(chan struct{})
	var burners sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		burners.Add(1)
		go func() {
			defer burners.Done()
			for n := 0; ; n++ {
				if n%1024 == 0 {
					select {
					case <-stop:
						return
					default:
					}
				}
			}
		}()
	}
	defer func() { close(stop); burners.Wait() }()

	conn := gatewaytest.Dial(t, addr)
	br := bufio.NewReader(conn)
	threads := map[string]int{}
	for range 40 {
		gatewaytest.Write(t, conn, "GET /tid HTTP/1.1\r\nHost: x\r\n\r\n")
		resp := gatewaytest.ReadAnswer(t, conn, br, false)
		if resp.StatusCode() != 200 {
			t.Fatalf("status %d", resp.StatusCode())
		}
		threads[string(resp.Body())]++
		time.Sleep(time.Millisecond) // let the monitor find the loop busy
	}
	if len(threads) != 1 {
		t.Fatalf("a loop's requests ran on %d OS threads (requests per thread: %v); want 1", len(threads), threads)
	}
}

// TestEventLoopsShareNewConns: a loop keeps what it accepts only while it
// serves no more than a few connections above the other loops, so that a
// burst of keep-alive connections (wrk's start) is spread evenly and not
// left on whichever loop woke first.
func TestEventLoopsShareNewConns(t *testing.T) {
	o := npOptions()
	o.Workers = 2
	_, addr := npServe(t, &loopStub{}, o)
	const n = 64
	conns := make([]net.Conn, n)
	for i := range conns { // all connected before any is served
		conns[i] = gatewaytest.Dial(t, addr)
	}
	perLoop := map[string]int{}
	for _, conn := range conns {
		gatewaytest.Write(t, conn, "GET /loop HTTP/1.1\r\nHost: x\r\n\r\n")
		resp := gatewaytest.ReadAnswer(t, conn, bufio.NewReader(conn), false)
		perLoop[string(resp.Body())]++
	}
	// Loop ids are unique among the process's live loops, not 0 and 1.
	var per [2]int
	i := 0
	for _, k := range perLoop {
		if i < len(per) {
			per[i] = k
		}
		i++
	}
	a, b := per[0], per[1]
	if len(perLoop) > 2 || a+b != n || a-b > 3 || b-a > 3 {
		t.Fatalf("connections per loop %v: want %d spread within 3 (the accepting loop keeps a connection while it has at most 2 more)", perLoop, n)
	}
}

// TestEventLoopAcceptPausesWhenOutOfFiles: the loops accept new connections
// themselves; when accept fails for want of file descriptors, a loop leaves
// the listener alone for a moment instead of spinning on it (the listener
// stays readable), and accepts again once descriptors are free.
func TestEventLoopAcceptPausesWhenOutOfFiles(t *testing.T) {
	o := npOptions()
	o.Workers = 2
	_, addr := npServe(t, &loopStub{}, o)
	first := gatewaytest.Dial(t, addr)
	gatewaytest.Write(t, first, "GET /first HTTP/1.1\r\nHost: x\r\n\r\n")
	gatewaytest.Check(t, gatewaytest.ReadAnswer(t, first, bufio.NewReader(first), false), 200, "ok /first")

	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	// Hold the process at its limit: every free descriptor taken.
	var held []int
	release := func() {
		for _, fd := range held {
			_ = syscall.Close(fd)
		}
		held = nil
	}
	defer func() { release(); _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) }()
	lim := old
	lim.Cur = 4096
	if lim.Cur > old.Max {
		t.Skip("hard descriptor limit below 4096")
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skip("cannot set the descriptor limit:", err)
	}
	// Every descriptor but one taken, and the client's socket takes that
	// one: the kernel completes the connection into the backlog, and the
	// gateway's accept fails with EMFILE.
	for {
		fd, err := syscall.Dup(0)
		if err != nil {
			break
		}
		held = append(held, fd)
	}
	_ = syscall.Close(held[len(held)-1])
	held = held[:len(held)-1]
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	gatewaytest.Write(t, conn, "GET /waiting HTTP/1.1\r\nHost: x\r\n\r\n")

	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	time.Sleep(500 * time.Millisecond)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	if cpu > 250*time.Millisecond {
		t.Fatalf("the process used %v of CPU in 500 ms while out of descriptors: a loop spins on the listener", cpu)
	}

	// One descriptor freed is enough: the loop's accept is the
	// connection's only descriptor (acceptFD). Made a net.Conn, it took a
	// second one for a moment, and the connection was accepted and then
	// dropped.
	_ = syscall.Close(held[len(held)-1])
	held = held[:len(held)-1]
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	var resp fasthttp.Response
	if err := resp.Read(bufio.NewReader(conn)); err != nil {
		t.Fatalf("with one descriptor free, the queued connection was not served: %v", err)
	}
	gatewaytest.Check(t, &resp, 200, "ok /waiting")
}
