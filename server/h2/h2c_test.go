package h2_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
	"golang.org/x/net/http2"
)

// h2cIdle: h2Routes with a short idle timeout, which bounds a header
// block trickled in empty CONTINUATION frames.
const h2cIdle = h2Routes + `
client:
  idle_timeout: 1s
`

// h2cTransports are the transports that serve h2c.
var h2cTransports = gatewaytest.Transports

// getHTTP1 asks addr for path over HTTP/1.1 and returns the status and body.
func getHTTP1(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestH2CCurl: curl speaking h2 with prior knowledge to the cleartext
// port gets the backend's answer on every transport, and an HTTP/1.1
// client on the same port still gets its own.
func TestH2CCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is needed (make test-deps installs it)")
	}
	for _, kind := range h2cTransports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			g, up := gatewaytest.StartRecorded(t, h2Routes, gatewaytest.Options{Transport: kind})
			out, err := exec.Command(curl, "-sS", "--http2-prior-knowledge", "-i", "-H", "X-Test: curl",
				"http://"+g.Addr+"/from-curl?q=1").CombinedOutput()
			if err != nil {
				t.Fatalf("curl: %v\n%s", err, out)
			}
			if !bytes.HasPrefix(out, []byte("HTTP/2 200")) || !bytes.HasSuffix(out, []byte("ok")) {
				t.Fatalf("curl got:\n%s", out)
			}
			last, _ := up.Last()
			if last.Line() != "GET /from-curl?q=1 HTTP/1.1" || !slices.Equal(last.Values("X-Test"), []string{"curl"}) {
				t.Fatalf("backend got:\n%s", last.Head)
			}
			if status, body := getHTTP1(t, g.Addr, "/plain"); status != 200 || body != "ok" {
				t.Fatalf("HTTP/1.1 on the same port: %d %q", status, body)
			}
			if last, _ := up.Last(); last.Line() != "GET /plain HTTP/1.1" {
				t.Fatalf("backend got:\n%s", last.Head)
			}
		})
	}
}

// TestH2CRapidReset (CVE-2023-44487) over cleartext: the h2c server has
// the same defence as the TLS listener's.
func TestH2CRapidReset(t *testing.T) {
	if testing.Short() {
		t.Skip("floods resets")
	}
	for _, kind := range h2cTransports {
		t.Run(kind, func(t *testing.T) {
			g, up := gatewaytest.StartRecorded(t, h2Routes, gatewaytest.Options{Transport: kind})
			sent, cut, err := testutil.H2RapidReset(g.Addr, nil, "a.test", "/flood", 20_000)
			if err != nil {
				t.Fatal(err)
			}
			if !cut {
				t.Fatalf("after %d reset streams the connection is still open", sent)
			}
			if served := up.Count(); served > 1000 {
				t.Fatalf("%d of %d reset streams reached the backend", served, sent)
			}
			counted := int64(0)
			for reason, n := range g.H2C.Stats().Refused {
				if strings.HasSuffix(reason, "early_resets") {
					counted += n
				}
			}
			if counted == 0 {
				t.Fatalf("no flood refusal counted: %+v", g.H2C.Stats())
			}
			if status, body := getHTTP1(t, g.Addr, "/after"); status != 200 || body != "ok" {
				t.Fatalf("after the flood: %d %q", status, body)
			}
		})
	}
}

// TestH2CContinuationFlood: a header block that never ends, over
// cleartext, ends the connection as it does over TLS.
func TestH2CContinuationFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the idle timeout")
	}
	for _, kind := range h2cTransports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			g, up := gatewaytest.StartRecorded(t, h2cIdle, gatewaytest.Options{Transport: kind})

			r := gatewaytest.DialH2C(t, g.Addr)
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

			r = gatewaytest.DialH2C(t, g.Addr)
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
			if up.Count() != 0 {
				t.Fatalf("the backend got %d requests", up.Count())
			}
		})
	}
}

// TestH2CDrainSaysGoAway: a draining gateway's answer on an h2c
// connection is followed by a GOAWAY, as over TLS.
func TestH2CDrainSaysGoAway(t *testing.T) {
	for _, kind := range h2cTransports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			g, _ := gatewaytest.StartRecorded(t, h2Routes, gatewaytest.Options{Transport: kind})
			expectGoAwayOnDrain(t, gatewaytest.DialH2C(t, g.Addr), g.GW.Drain)
		})
	}
}

// TestH2COff: with client.h2c false, a client opening with the preface
// gets the server's SETTINGS, its first request is reset with
// HTTP_1_1_REQUIRED and a GOAWAY says the same and why, then the
// connection closes; curl is told at once; HTTP/1.1 on the port is
// served.
func TestH2COff(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is needed (make test-deps installs it)")
	}
	for _, kind := range h2cTransports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			g, up := gatewaytest.StartRecorded(t, h2Routes+"client:\n  h2c: false\n", gatewaytest.Options{Transport: kind})
			if g.H2C != nil {
				t.Fatal("an h2c server with client.h2c false")
			}
			r := gatewaytest.DialH2C(t, g.Addr)
			id := r.Send(nil, gatewaytest.H2Get("/refused")...)
			_ = r.Conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			var goaway *http2.GoAwayFrame
			var reset *http2.RSTStreamFrame
			settings := false
			for {
				f, err := r.Framer.ReadFrame()
				if err != nil {
					break
				}
				switch f := f.(type) {
				case *http2.SettingsFrame:
					settings = true
				case *http2.RSTStreamFrame:
					reset = f
				case *http2.GoAwayFrame:
					goaway = f
				}
			}
			if !settings || reset == nil || reset.StreamID != id || reset.ErrCode != http2.ErrCodeHTTP11Required {
				t.Fatalf("SETTINGS %v, RST_STREAM %+v", settings, reset)
			}
			if goaway == nil || goaway.ErrCode != http2.ErrCodeHTTP11Required || goaway.LastStreamID != id ||
				!strings.Contains(string(goaway.DebugData()), "client.h2c") {
				t.Fatalf("GOAWAY %+v", goaway)
			}
			if up.Count() != 0 {
				t.Fatalf("the backend got %d requests", up.Count())
			}
			// A curl that retries over HTTP/1.1 gets the answer; an older one
			// (7.88) stops at once, showing the code.
			start := time.Now()
			out, err := exec.Command(curl, "-sS", "-v", "--max-time", "5", "--http2-prior-knowledge", "http://"+g.Addr+"/curl-off").CombinedOutput()
			retried := err == nil && bytes.Contains(out, []byte("< HTTP/1.1 200")) && bytes.HasSuffix(out, []byte("ok"))
			told := err != nil && (bytes.Contains(out, []byte("error=13")) || bytes.Contains(out, []byte("HTTP_1_1_REQUIRED")))
			if !retried && !told || time.Since(start) > 2*time.Second {
				t.Fatalf("curl --http2-prior-knowledge with h2c off, after %v (%v):\n%s", time.Since(start), err, out)
			}
			if status, body := getHTTP1(t, g.Addr, "/plain"); status != 200 || body != "ok" {
				t.Fatalf("HTTP/1.1 with h2c off: %d %q", status, body)
			}
		})
	}
}

// TestH2CPrefaceOnlyFirst: only a connection's first bytes can be the
// preface. A preface after an HTTP/1.1 request, or bytes that start like
// one and then part from it, are HTTP/1 input, refused as such (a 400,
// or a close): nothing reaches the backend but the real request, and no
// HTTP/2 frame comes back.
func TestH2CPrefaceOnlyFirst(t *testing.T) {
	for _, kind := range h2cTransports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			g, up := gatewaytest.StartRecorded(t, h2Routes, gatewaytest.Options{Transport: kind})
			for _, tc := range []struct {
				name, input string
				served      int
			}{
				{"preface after a request", "GET /first HTTP/1.1\r\nHost: a.test\r\n\r\n" + http2.ClientPreface, 1},
				{"preface-like then garbage", "PRI * HTTP/2.0\r\n\r\nXX\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a.test\r\n\r\n", 0},
				{"preface line alone", "PRI * HTTP/2.0\r\nHost: a.test\r\n\r\n", 0},
			} {
				before := up.Count()
				conn, err := net.DialTimeout("tcp", g.Addr, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := io.WriteString(conn, tc.input); err != nil {
					t.Fatal(err)
				}
				out, err := io.ReadAll(conn)
				conn.Close()
				if errors.Is(err, syscall.ECONNRESET) {
					// Closed with the client's input unread: refused too.
					err = nil
				}
				if err != nil {
					t.Fatalf("%s: %v (the connection stayed open)", tc.name, err)
				}
				if got := up.Count() - before; got != tc.served {
					t.Fatalf("%s: %d requests reached the backend, want %d", tc.name, got, tc.served)
				}
				if tc.served == 0 && len(out) > 0 && !bytes.HasPrefix(out, []byte("HTTP/1.1 4")) && !bytes.HasPrefix(out, []byte("HTTP/1.1 5")) {
					t.Fatalf("%s: got %q", tc.name, out)
				}
				t.Logf("%s: %q", tc.name, firstLine(out))
			}
		})
	}
}

func firstLine(b []byte) string {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}

// TestH2CUpgradeRefused: an HTTP/1.1 request asking to switch to h2c
// (Upgrade: h2c) is served as HTTP/1.1 and never switched, and neither
// the Upgrade nor the HTTP2-Settings field reaches the backend, whether
// or not Connection names them; curl's --http2 on a cleartext URL (which
// asks for the upgrade) gets its answer over HTTP/1.1.
func TestH2CUpgradeRefused(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is needed (make test-deps installs it)")
	}
	for _, kind := range h2cTransports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			g, up := gatewaytest.StartRecorded(t, h2Routes, gatewaytest.Options{Transport: kind})
			for _, connection := range []string{"Connection: Upgrade, HTTP2-Settings\r\n", ""} {
				conn, err := net.DialTimeout("tcp", g.Addr, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
				_, err = io.WriteString(conn, "GET /upgrade HTTP/1.1\r\nHost: a.test\r\n"+connection+
					"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nX-Keep: 1\r\n\r\n")
				if err != nil {
					t.Fatal(err)
				}
				line := make([]byte, len("HTTP/1.1 200"))
				_, err = io.ReadFull(conn, line)
				conn.Close()
				if err != nil || string(line) != "HTTP/1.1 200" {
					t.Fatalf("%q: answered %q (%v)", connection, line, err)
				}
				last, _ := up.Last()
				if last.Line() != "GET /upgrade HTTP/1.1" || last.Values("X-Keep") == nil {
					t.Fatalf("backend got:\n%s", last.Head)
				}
				for _, f := range []string{"Upgrade", "HTTP2-Settings", "Connection"} {
					if v := last.Values(f); len(v) > 0 && f != "Connection" || slices.ContainsFunc(v, func(s string) bool {
						return strings.Contains(strings.ToLower(s), "upgrade") || strings.Contains(strings.ToLower(s), "settings")
					}) {
						t.Fatalf("%q: the backend got %s: %q", connection, f, v)
					}
				}
			}
			out, err := exec.Command(curl, "-sS", "--http2", "-i", "http://"+g.Addr+"/curl-upgrade").CombinedOutput()
			if err != nil {
				t.Fatalf("curl: %v\n%s", err, out)
			}
			if !bytes.HasPrefix(out, []byte("HTTP/1.1 200")) || !bytes.HasSuffix(out, []byte("ok")) {
				t.Fatalf("curl --http2 got:\n%s", out)
			}
		})
	}
}

// TestH2CMaxConns: h2c connections count against client.max_conns on
// every transport; one past it is closed, not served.
func TestH2CMaxConns(t *testing.T) {
	for _, kind := range h2cTransports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			g, _ := gatewaytest.StartRecorded(t, h2Routes+"client:\n  max_conns: 2\n", gatewaytest.Options{Transport: kind})
			for range 2 {
				r := gatewaytest.DialH2C(t, g.Addr)
				if o := r.Await(r.Send(nil, gatewaytest.H2Get("/ok")...)); o.Status != "200" {
					t.Fatalf("within the limit: %+v", o)
				}
			}
			conn, err := net.DialTimeout("tcp", g.Addr, 5*time.Second)
			if err != nil {
				return // refused at connect: also past the limit
			}
			defer conn.Close()
			_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			_, _ = io.WriteString(conn, http2.ClientPreface)
			var b [1]byte
			for err == nil {
				_, err = conn.Read(b[:])
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("a third h2c connection was served with max_conns 2")
			}
		})
	}
}

// TestH2CShutdown: a shutdown lets a request in flight on an h2c
// connection finish, tells the client to go away, and returns once it is
// answered, with no h2c connection left.
func TestH2CShutdown(t *testing.T) {
	for _, kind := range h2cTransports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			inflight := make(chan struct{}, 1)
			slow := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				inflight <- struct{}{}
				time.Sleep(400 * time.Millisecond)
				_, _ = io.WriteString(w, "slow")
			})}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = slow.Serve(ln) }()
			t.Cleanup(func() { _ = slow.Close() })
			g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": ln.Addr().String()}})
			r := gatewaytest.DialH2C(t, g.Addr)
			id := r.Send(nil, gatewaytest.H2Get("/inflight")...)
			<-inflight
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- g.Transport.Shutdown(ctx) }()
			_ = r.Conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			var status, body string
			goaway := false
			for {
				f, err := r.Framer.ReadFrame()
				if err != nil {
					break
				}
				switch f := f.(type) {
				case *http2.GoAwayFrame:
					goaway = true
				case *http2.MetaHeadersFrame:
					if f.StreamID == id {
						status = f.PseudoValue("status")
					}
				case *http2.DataFrame:
					if f.StreamID == id {
						body += string(f.Data())
					}
				}
			}
			if status != "200" || body != "slow" || !goaway {
				t.Fatalf("in flight: %q %q, GOAWAY %v", status, body, goaway)
			}
			if err := <-done; err != nil {
				t.Fatalf("shutdown: %v", err)
			}
			if n := g.H2C.Conns(); n != 0 {
				t.Fatalf("%d h2c connections left", n)
			}
		})
	}
}
