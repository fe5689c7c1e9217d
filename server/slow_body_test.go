package server_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/server/h2"
	"github.com/valyala/fasthttp"
)

// slowBodyRoutes: a service whose exchange may take 2 s in all; bodies
// above the default stream_body_bytes (1 MiB) are streamed to it.
const slowBodyRoutes = `
services:
  up:
    instances: [{addr: "${UP}"}]
    timeouts: {connect: 500ms, read: 1s, total: 2s}
routes:
  - {name: all, match: {prefix: /}, service: up}
`

// trickle sends a request claiming a 2 MiB body and then sends the body
// at about 10 KiB/s (nothing after the first MiB when stall is set) until
// the gateway answers or closes; it returns the answer's status (0 for
// none) and when it came.
func trickle(t *testing.T, addr string, stall bool) (status int, after time.Duration) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := conn.Write([]byte("POST /upload HTTP/1.1\r\nHost: h\r\nContent-Length: 2097152\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	answered := make(chan int, 1)
	go func() {
		_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
		var resp fasthttp.Response
		if err := resp.Read(bufio.NewReader(conn)); err != nil {
			answered <- 0
			return
		}
		answered <- resp.StatusCode()
	}()
	// The first 1 MiB quickly, so that the body is past stream_body_bytes
	// and streams; then 1 KiB every 100 ms.
	if _, err := conn.Write([]byte(strings.Repeat("a", 1<<20+1))); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	chunk := []byte(strings.Repeat("b", 1024))
	for {
		select {
		case s := <-answered:
			return s, time.Since(start)
		case <-tick.C:
			if stall {
				continue
			}
			_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := conn.Write(chunk); err != nil {
				select {
				case s := <-answered:
					return s, time.Since(start)
				case <-time.After(2 * time.Second):
					return 0, time.Since(start)
				}
			}
		}
	}
}

// TestSlowBodyCutByTheTotalBudget: a body trickled at 10 KiB/s past
// stream_body_bytes, or not sent at all past it, is cut when the service's
// budget runs out (here the shared pool's write timeout, 1 s, or the
// total, 2 s), answered 408 (the client was slow, not the backend), and
// the backend connection it held is closed; on every transport.
func TestSlowBodyCutByTheTotalBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("trickles bodies until the budget runs out")
	}
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			g, up := gatewaytest.StartRecorded(t, slowBodyRoutes, gatewaytest.Options{Transport: kind})
			for _, stall := range []bool{false, true} {
				status, after := trickle(t, g.Addr, stall)
				t.Logf("stall=%v: %d after %v", stall, status, after.Round(time.Millisecond))
				if status != 408 || after > 3500*time.Millisecond {
					t.Errorf("stall=%v: status %d after %v, want 408 within the 2 s budget (and a little)",
						stall, status, after.Round(time.Millisecond))
				}
				deadline := time.Now().Add(time.Second)
				for up.Open() > 0 && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if n := up.Open(); n > 0 {
					t.Errorf("stall=%v: %d backend connections still open a second after the answer", stall, n)
				}
			}
			if n := up.Count(); n != 0 {
				t.Errorf("the backend received %d whole requests", n)
			}
		})
	}
}

// slowReader gives 1 MiB and a byte at once, then 1 KiB every 100 ms (or
// nothing more when stall is set), up to 2 MiB.
type slowReader struct {
	sent  int
	stall bool
}

func (r *slowReader) Read(p []byte) (int, error) {
	const total, fast = 2 << 20, 1<<20 + 1
	switch {
	case r.sent >= total:
		return 0, io.EOF
	case r.sent < fast:
		n := min(len(p), fast-r.sent)
		r.sent += n
		return n, nil
	case r.stall:
		time.Sleep(4 * time.Second) // past the budget, and the test's bound
		return 0, io.ErrUnexpectedEOF
	}
	time.Sleep(100 * time.Millisecond)
	n := min(len(p), 1024)
	r.sent += n
	return n, nil
}

// TestSlowBodyCutOverH2: the same over h2, on every transport.
func TestSlowBodyCutOverH2(t *testing.T) {
	if testing.Short() {
		t.Skip("trickles bodies until the budget runs out")
	}
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := gatewaytest.StartH2(t, slowBodyRoutes, h2.Options{}, gatewaytest.Options{Transport: kind})
			for _, stall := range []bool{false, true} {
				req, err := http.NewRequest("POST", "https://"+e.Addr+"/upload", &slowReader{stall: stall})
				if err != nil {
					t.Fatal(err)
				}
				req.ContentLength = 2 << 20
				req.Host = "a.test"
				start := time.Now()
				resp, err := e.Client(true).Do(req)
				after := time.Since(start)
				if err != nil {
					t.Errorf("stall=%v: %v after %v", stall, err, after)
					continue
				}
				resp.Body.Close()
				t.Logf("stall=%v: %d after %v", stall, resp.StatusCode, after.Round(time.Millisecond))
				if resp.StatusCode != 408 || after > 3500*time.Millisecond {
					t.Errorf("stall=%v: status %d after %v, want 408 within the budget", stall, resp.StatusCode, after.Round(time.Millisecond))
				}
				deadline := time.Now().Add(time.Second)
				for e.Up.Open() > 0 && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if n := e.Up.Open(); n > 0 {
					t.Errorf("stall=%v: %d backend connections still open a second after the answer", stall, n)
				}
			}
		})
	}
}
