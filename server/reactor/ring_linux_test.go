//go:build linux

package reactor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/uring"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/server/transport"
	"github.com/valyala/fasthttp"
)

// ringBreaker answers every request with its path, and /big with 4 MiB
// (more than a socket takes at once). On /break it first
// takes its loop's io_uring away, as a kernel that starts refusing the
// ring would, and holds the loop a while: requests that come meanwhile are
// read in one batch, which needs the ring.
type ringBreaker struct{}

func (h ringBreaker) Serve(c *pipeline.Ctx) bool {
	return h.serveOn(c.Req, c.Resp, c.Loop)
}

func (ringBreaker) serveOn(req *fasthttp.Request, resp *fasthttp.Response, loop pipeline.Loop) bool {
	if string(req.URI().Path()) == "/break" {
		if f, ok := loop.(*fiber); ok && f.s.ring != nil {
			// The ring's descriptor now names /dev/null: io_uring_enter
			// fails, and the ring's Close closes the copy.
			null, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
			if err == nil {
				_ = syscall.Dup3(null, f.s.ring.FD(), syscall.O_CLOEXEC)
				_ = syscall.Close(null)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if string(req.URI().Path()) == "/hold" {
		time.Sleep(200 * time.Millisecond)
	}
	if string(req.URI().Path()) == "/big" {
		resp.SetBodyRaw(bigAnswer)
		return false
	}
	resp.SetBodyString("path ")
	resp.AppendBody(req.URI().Path())
	return false
}

func (ringBreaker) ServeError(err error, c *pipeline.Ctx) {
	c.Resp.SetStatusCode(400)
}

// ringServe serves ringBreaker on one event loop until the test ends,
// with the io_uring option mode.
func ringServe(t *testing.T, mode string) (*reactorTransport, string) {
	t.Helper()
	return ringServeSized(t, mode, 0)
}

// ringServeSized is ringServe with rings of entries calls (0: the default).
func ringServeSized(t *testing.T, mode string, entries uint32) (*reactorTransport, string) {
	t.Helper()
	tr, err := New(ringBreaker{}, transport.Options{Workers: 1, IOUring: mode,
		HeaderTimeout: 2 * time.Second, IdleTimeout: 5 * time.Second, WriteTimeout: 2 * time.Second})
	if err != nil {
		if mode == "on" && errors.Is(err, uring.ErrUnsupported) {
			t.Skipf("no io_uring here: %v", err)
		}
		t.Fatal(err)
	}
	if entries > 0 {
		tr.(*reactorTransport).ringEntries = entries
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tr.Serve(ln) }()
	// Serving once the loops are up: a request has been answered.
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	get(t, c, bufio.NewReader(c), "/up")
	_ = c.Close()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
		<-done
	})
	return tr.(*reactorTransport), ln.Addr().String()
}

// get sends GETs for paths on conn, pipelined, and checks each answer.
func get(t *testing.T, conn net.Conn, br *bufio.Reader, paths ...string) {
	t.Helper()
	var b strings.Builder
	for _, p := range paths {
		b.WriteString("GET " + p + " HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		var resp fasthttp.Response
		if err := resp.Read(br); err != nil {
			t.Fatalf("answer to %s: %v", p, err)
		}
		if got := string(resp.Body()); got != "path "+p {
			t.Fatalf("answer to %s: %q", p, got)
		}
	}
}

func TestSocketCallsReported(t *testing.T) {
	tr, _ := ringServe(t, "off")
	if got := tr.SocketCalls(); !strings.Contains(got, "one syscall each (io_uring: off)") {
		t.Fatalf("off: %q", got)
	}
	if n := tr.IOUringLoops(); n != 0 {
		t.Fatalf("off: %d loops with a ring", n)
	}
	tr, _ = ringServe(t, "on")
	if got := tr.SocketCalls(); got != "in batches through io_uring" {
		t.Fatalf("on: %q", got)
	}
	if n := tr.IOUringLoops(); n != 1 {
		t.Fatalf("on: %d loops with a ring, want 1", n)
	}
}

// A loop whose ring the kernel refuses mid-run makes the calls of that
// batch, and every later call, one by one: no request is lost or answered
// twice, and the transport says so.
func TestRingRefusedMidRun(t *testing.T) {
	tr, addr := ringServe(t, "on")
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c, bufio.NewReader(c)
	}
	a, abr := dial()
	b, bbr := dial()
	breaker, brk := dial()
	get(t, a, abr, "/a1", "/a2")
	get(t, b, bbr, "/b1")
	// While /break holds the loop, a and b send: the loop then reads both
	// in one batch, through a ring that fails.
	if _, err := breaker.Write([]byte("GET /break HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	done := make(chan struct{})
	go func() {
		defer close(done)
		get(t, b, bbr, "/b2", "/b3")
	}()
	get(t, a, abr, "/a3", "/a4")
	<-done
	var resp fasthttp.Response
	_ = breaker.SetReadDeadline(time.Now().Add(5 * time.Second))
	if err := resp.Read(brk); err != nil || string(resp.Body()) != "path /break" {
		t.Fatalf("/break: %v %q", err, resp.Body())
	}
	if got := tr.SocketCalls(); !strings.Contains(got, "since its io_uring failed") {
		t.Fatalf("SocketCalls after the failure: %q", got)
	}
	if n := tr.IOUringLoops(); n != 0 {
		t.Fatalf("IOUringLoops after the failure: %d", n)
	}
	get(t, a, abr, "/a5")
	c, cbr := dial()
	get(t, c, cbr, "/c1", "/c2")
	for _, conn := range []struct {
		c  net.Conn
		br *bufio.Reader
	}{{a, abr}, {b, bbr}, {breaker, brk}} {
		_ = conn.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if n, _ := conn.br.Read(make([]byte, 1)); n != 0 {
			t.Fatal("bytes after the last answer: an answer sent twice")
		}
	}
}

// More calls than the ring holds in one batch: the loop submits the ring
// whenever it is full, and each fiber still gets its own call's result.
func TestRingFullSubmitsEarly(t *testing.T) {
	tr, addr := ringServeSized(t, "on", 4)
	const clients = 12
	conns := make([]net.Conn, clients)
	readers := make([]*bufio.Reader, clients)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		conns[i], readers[i] = c, bufio.NewReader(c)
		get(t, c, readers[i], fmt.Sprintf("/warm/%d", i))
	}
	made, ring := loopRing(tr)
	hold, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	if _, err := hold.Write([]byte("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	// While /hold holds the loop, every client sends: the loop then reads
	// twelve sockets in one batch, through a ring of four.
	errs := make(chan error, clients)
	for i, c := range conns {
		go func() {
			paths := []string{fmt.Sprintf("/c/%d/a", i), fmt.Sprintf("/c/%d/b", i)}
			ok := func() (err error) {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("%v", r)
					}
				}()
				var b strings.Builder
				for _, p := range paths {
					b.WriteString("GET " + p + " HTTP/1.1\r\nHost: x\r\n\r\n")
				}
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := c.Write([]byte(b.String())); err != nil {
					return err
				}
				for _, p := range paths {
					var resp fasthttp.Response
					if err := resp.Read(readers[i]); err != nil {
						return fmt.Errorf("answer to %s: %w", p, err)
					}
					if got := string(resp.Body()); got != "path "+p {
						return fmt.Errorf("answer to %s: %q", p, got)
					}
				}
				return nil
			}
			errs <- ok()
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var resp fasthttp.Response
	_ = hold.SetReadDeadline(time.Now().Add(5 * time.Second))
	if err := resp.Read(bufio.NewReader(hold)); err != nil || string(resp.Body()) != "path /hold" {
		t.Fatalf("/hold: %v %q", err, resp.Body())
	}
	if n := tr.IOUringLoops(); n != 1 {
		t.Fatalf("%d loops with a ring after the batch, want 1", n)
	}
	if n := ring.Made() - made; n < clients {
		t.Fatalf("%d calls through the ring for %d clients read in one batch", n, clients)
	}
}

// loopRing is the transport's first loop's ring and the calls it has made
// so far; the loops and their rings are set under t.mu.
func loopRing(tr *reactorTransport) (uint64, *uring.Ring) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	r := tr.loops[0].ev.ring
	if r == nil {
		return 0, nil
	}
	return r.Made(), r
}

var bigAnswer = make([]byte, 4<<20)

// Clients that reset their connections while the loop writes them their
// answers: the sends in the batch fail for those sockets alone. The loop
// goes on serving, with its ring, and every connection is let go.
func TestClientsResettingMidAnswer(t *testing.T) {
	for _, mode := range []string{"on", "off"} {
		t.Run(mode, func(t *testing.T) {
			tr, addr := ringServe(t, mode)
			const clients = 16
			var wg sync.WaitGroup
			for range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c, err := net.Dial("tcp", addr)
					if err != nil {
						t.Error(err)
						return
					}
					_, _ = c.Write([]byte("GET /big HTTP/1.1\r\nHost: x\r\n\r\nGET /big HTTP/1.1\r\nHost: x\r\n\r\n"))
					_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
					_, _ = io.ReadFull(c, make([]byte, 64<<10)) // the answer is being written
					_ = c.(*net.TCPConn).SetLinger(0)           // close with a reset
					_ = c.Close()
				}()
			}
			wg.Wait()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			get(t, c, bufio.NewReader(c), "/after", "/resets")
			_ = c.Close()
			deadline := time.Now().Add(5 * time.Second)
			for tr.Conns() != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%d connections still held after their clients reset them", tr.Conns())
				}
				time.Sleep(10 * time.Millisecond)
			}
			want := map[string]int{"on": 1, "off": 0}[mode]
			if n := tr.IOUringLoops(); n != want {
				t.Fatalf("%d loops with a ring after the resets, want %d", n, want)
			}
		})
	}
}
