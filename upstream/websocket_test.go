package upstream_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/edgetls"
	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/server"
	"github.com/tollgate/tollgate/sign"
	"github.com/tollgate/tollgate/upstream"
	"github.com/valyala/fasthttp"
)

// wsUpstream answers a WebSocket handshake with 101 and "hello", then
// echoes every byte; anything else gets 400 naming what was missing.
func wsUpstream(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				var req fasthttp.RequestHeader
				if req.Read(br) != nil {
					return
				}
				if !bytes.EqualFold(req.Peek("Upgrade"), []byte("websocket")) || !bytes.Contains(bytes.ToLower(req.Peek("Connection")), []byte("upgrade")) {
					_, _ = io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 10\r\nConnection: close\r\n\r\nno upgrade")
					return
				}
				if bytes.HasSuffix(req.RequestURI(), []byte("/refuse-long")) {
					// A refusal longer than any window: 2 MiB of body.
					_, _ = io.WriteString(c, "HTTP/1.1 426 Upgrade Required\r\nContent-Length: 2097152\r\n\r\n")
					_, _ = c.Write(make([]byte, 2<<20))
					return
				}
				if bytes.HasSuffix(req.RequestURI(), []byte("/refuse")) {
					_, _ = io.WriteString(c, "HTTP/1.1 426 Upgrade Required\r\nContent-Length: 7\r\n\r\nrefused")
					_, _ = io.Copy(io.Discard, br) // anything tunnelled would land here
					return
				}
				_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: x\r\n\r\nhello")
				if bytes.HasSuffix(req.RequestURI(), []byte("/bye")) {
					return // the backend ends the session
				}
				_, _ = io.Copy(c, br)
			}()
		}
	}()
	return ln.Addr().String()
}

const wsConfig = `
consumers:
  - {app_key: app, secret: a-secret-of-some-length}
services:
  ws:
    instances: [{addr: "${UP}"}]
routes:
  - name: ws
    match: {prefix: /ws}
    websocket: {idle_timeout: 400ms}
    service: ws
  - name: signed
    match: {prefix: /signed}
    websocket: {}
    auth: signature
    service: ws
  - name: plain
    match: {prefix: /}
    service: ws
`

const wsHandshake = "GET %s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"

// switched reads the answer to a handshake and fails unless it is a 101
// switching to websocket.
func switched(t *testing.T, conn net.Conn, br *bufio.Reader) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	var resp fasthttp.ResponseHeader
	if err := resp.Read(br); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode() != 101 || !bytes.EqualFold(resp.Peek("Upgrade"), []byte("websocket")) ||
		!bytes.Contains(bytes.ToLower(resp.Peek("Connection")), []byte("upgrade")) {
		t.Fatalf("handshake answer:\n%s", resp.Header())
	}
}

// TestWebSocketRelay: a handshake on a websocket route is switched, the
// bytes sent right behind it and the backend's right behind its 101 are
// not lost, the relay echoes both ways, and it ends after the idle time.
func TestWebSocketRelay(t *testing.T) {
	up := wsUpstream(t)
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			g := gatewaytest.Start(t, wsConfig, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up}})
			conn := gatewaytest.Dial(t, g.Addr)
			br := bufio.NewReader(conn)
			gatewaytest.Write(t, conn, strings.Replace(wsHandshake, "%s", "/ws/chat", 1)+"early;")
			switched(t, conn, br)
			want := "helloearly;"
			got := make([]byte, len(want))
			if _, err := io.ReadFull(br, got); err != nil || string(got) != want {
				t.Fatalf("first bytes %q, %v; want %q", got, err, want)
			}
			for _, msg := range []string{"one", "two, longer", strings.Repeat("x", 40000)} {
				gatewaytest.Write(t, conn, msg)
				got := make([]byte, len(msg))
				if _, err := io.ReadFull(br, got); err != nil || string(got) != msg {
					t.Fatalf("echo of %d bytes: %v", len(msg), err)
				}
			}
			start := time.Now()
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := br.ReadByte(); err == nil {
				t.Fatal("bytes after the echo")
			}
			if took := time.Since(start); took < 300*time.Millisecond || took > 3*time.Second {
				t.Fatalf("an idle relay ended after %v, want about its 400ms idle timeout", took)
			}
		})
	}
}

// TestWebSocketOnlyWhereAllowed: the handshake goes through the route's
// filters (an unsigned one is refused), and on a route without websocket
// the Upgrade field never reaches the backend.
func TestWebSocketOnlyWhereAllowed(t *testing.T) {
	up := wsUpstream(t)
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			g := gatewaytest.Start(t, wsConfig, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up}})
			for path, status := range map[string]int{"/signed/x": 401, "/plain": 400} {
				conn := gatewaytest.Dial(t, g.Addr)
				gatewaytest.Write(t, conn, strings.Replace(wsHandshake, "%s", path, 1))
				resp := gatewaytest.ReadAnswer(t, conn, bufio.NewReader(conn), false)
				if resp.StatusCode() != status {
					t.Fatalf("%s: %d %s, want %d", path, resp.StatusCode(), resp.Body(), status)
				}
			}
		})
	}
}

// TestWebSocketOverTLSAndCap: the relay runs over TLS too, and ends once
// max_bytes have passed.
func TestWebSocketOverTLSAndCap(t *testing.T) {
	up := wsUpstream(t)
	dir := t.TempDir()
	ca := testutil.NewTestCA(t)
	cert, key := ca.Issue(t, dir, "a", "A", "a.test")
	store, err := edgetls.NewStore([]edgetls.Pair{{Cert: cert, Key: key}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(wsConfig, "websocket: {idle_timeout: 400ms}", "websocket: {max_bytes: 1000}", 1)
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			g := gatewaytest.Start(t, cfg, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up}, Tweak: func(o *server.Options) {
				o.TLS = store.Config(tls.VersionTLS12, nil)
			}})
			conn, err := tls.Dial("tcp", g.Addr, &tls.Config{ServerName: "a.test", RootCAs: ca.Pool()})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			br := bufio.NewReader(conn)
			if _, err := io.WriteString(conn, strings.Replace(wsHandshake, "%s", "/ws", 1)); err != nil {
				t.Fatal(err)
			}
			switched(t, conn, br)
			hello := make([]byte, 5)
			if _, err := io.ReadFull(br, hello); err != nil || string(hello) != "hello" {
				t.Fatalf("%q %v", hello, err)
			}
			// 600 bytes out and 600 back pass the 1000-byte cap.
			msg := strings.Repeat("y", 600)
			gatewaytest.Write(t, conn, msg)
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(br, got); err != nil || string(got) != msg {
				t.Fatalf("echo under the cap: %d bytes, %v", len(got), err)
			}
			gatewaytest.Write(t, conn, msg)
			_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			n, err := io.Copy(io.Discard, br)
			if err != nil || n >= int64(len(msg)) {
				t.Fatalf("after the cap: %d more bytes, %v (want the relay closed)", n, err)
			}
		})
	}
}

// TestWebSocketThroughSignedRoute: a signed handshake passes the route's
// signature check and the connection echoes.
func TestWebSocketThroughSignedRoute(t *testing.T) {
	up := wsUpstream(t)
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			g := gatewaytest.Start(t, wsConfig, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up}})
			r, _ := http.NewRequest(http.MethodGet, "http://x/signed/chat", nil)
			if err := sign.SignRequest(r, "app", "a-secret-of-some-length", time.Time{}, ""); err != nil {
				t.Fatal(err)
			}
			var head strings.Builder
			head.WriteString(strings.TrimSuffix(strings.Replace(wsHandshake, "%s", "/signed/chat", 1), "\r\n"))
			for k, vs := range r.Header {
				head.WriteString(k + ": " + vs[0] + "\r\n")
			}
			head.WriteString("\r\n")
			conn := gatewaytest.Dial(t, g.Addr)
			br := bufio.NewReader(conn)
			gatewaytest.Write(t, conn, head.String())
			switched(t, conn, br)
			gatewaytest.Write(t, conn, "ping")
			got := make([]byte, 9)
			if _, err := io.ReadFull(br, got); err != nil || string(got) != "helloping" {
				t.Fatalf("%q %v", got, err)
			}
		})
	}
}

// TestWebSocketRelayEndsWhenTheDrainGivesUp: a relay still open when a
// drain runs out of time is ended with the transport (on the event loops,
// both of its fibers), not left to its idle timeout.
func TestWebSocketRelayEndsWhenTheDrainGivesUp(t *testing.T) {
	up := wsUpstream(t)
	cfg := strings.Replace(wsConfig, "websocket: {idle_timeout: 400ms}", "websocket: {idle_timeout: 60s}", 1)
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			g := gatewaytest.Start(t, cfg, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up}})
			conn := gatewaytest.Dial(t, g.Addr)
			br := bufio.NewReader(conn)
			gatewaytest.Write(t, conn, strings.Replace(wsHandshake, "%s", "/ws", 1))
			switched(t, conn, br)
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			_ = g.Transport.Shutdown(ctx)
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, _ = io.Copy(io.Discard, br)
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("the relay ended %v after the drain began", took)
			}
		})
	}
}

// TestWebSocketBackendEndsRelay: when the backend closes, the client's side
// closes at once, not at the idle timeout.
func TestWebSocketBackendEndsRelay(t *testing.T) {
	up := wsUpstream(t)
	cfg := strings.Replace(wsConfig, "websocket: {idle_timeout: 400ms}", "websocket: {idle_timeout: 60s}", 1)
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			g := gatewaytest.Start(t, cfg, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up}})
			conn := gatewaytest.Dial(t, g.Addr)
			br := bufio.NewReader(conn)
			gatewaytest.Write(t, conn, strings.Replace(wsHandshake, "%s", "/ws/bye", 1))
			switched(t, conn, br)
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			start := time.Now()
			rest, err := io.ReadAll(br)
			if err != nil || string(rest) != "hello" {
				t.Fatalf("after the switch: %q, %v", rest, err)
			}
			if took := time.Since(start); took > 3*time.Second {
				t.Fatalf("the client's side closed %v after the backend's", took)
			}
		})
	}
}

// TestWebSocketRefusedStaysHTTP: when the backend refuses the switch, the
// bytes behind the handshake are the client's next HTTP request, which
// goes through the gateway (here refused unsigned), not a tunnel.
func TestWebSocketRefusedStaysHTTP(t *testing.T) {
	up := wsUpstream(t)
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			g := gatewaytest.Start(t, wsConfig, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up}})
			conn := gatewaytest.Dial(t, g.Addr)
			br := bufio.NewReader(conn)
			gatewaytest.Write(t, conn, strings.Replace(wsHandshake, "%s", "/ws/refuse", 1)+
				"GET /signed/admin HTTP/1.1\r\nHost: x\r\n\r\n")
			if resp := gatewaytest.ReadAnswer(t, conn, br, false); resp.StatusCode() != 426 || string(resp.Body()) != "refused" {
				t.Fatalf("refused switch: %d %q", resp.StatusCode(), resp.Body())
			}
			if resp := gatewaytest.ReadAnswer(t, conn, br, false); resp.StatusCode() != 401 {
				t.Fatalf("the request behind a refused handshake: %d %s", resp.StatusCode(), resp.Body())
			}
		})
	}
}

// TestWebSocketLongRefusalNotHeld: a backend that refuses the switch with
// a body longer than the window the gateway holds of an answer gets 502:
// a handshake's answer cannot stream, and is not held whole either.
func TestWebSocketLongRefusalNotHeld(t *testing.T) {
	up := wsUpstream(t)
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			g := gatewaytest.Start(t, wsConfig, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up}})
			conn := gatewaytest.Dial(t, g.Addr)
			br := bufio.NewReader(conn)
			gatewaytest.Write(t, conn, strings.Replace(wsHandshake, "%s", "/ws/refuse-long", 1))
			if resp := gatewaytest.ReadAnswer(t, conn, br, false); resp.StatusCode() != 502 {
				t.Fatalf("a 2 MiB refusal of the switch: %d, %d body bytes", resp.StatusCode(), len(resp.Body()))
			}
		})
	}
}

// TestWebSocketRelayIsLoad: an open relay counts among its instance's
// requests in flight — a least_conn service sends new work to the other
// instance meanwhile — and stops counting when the relay ends.
func TestWebSocketRelayIsLoad(t *testing.T) {
	a, b := wsUpstream(t), wsUpstream(t)
	yaml := strings.Replace(strings.Replace(wsConfig, `instances: [{addr: "${UP}"}]`,
		`instances: [{addr: "${UP}"}, {addr: "${UP2}"}]
    balance: least_conn`, 1), "idle_timeout: 400ms", "idle_timeout: 5s", 1)
	g := gatewaytest.Start(t, yaml, gatewaytest.Options{Vars: map[string]string{"UP": a, "UP2": b}})
	conn := gatewaytest.Dial(t, g.Addr)
	br := bufio.NewReader(conn)
	gatewaytest.Write(t, conn, strings.Replace(wsHandshake, "%s", "/ws", 1))
	switched(t, conn, br)
	inflight := func() map[string]int64 {
		out := map[string]int64{}
		for _, in := range upstream.ServicesOf(g.GW.Snapshot().Env())["ws"].Instances() {
			out[in.Addr] = in.InFlight()
		}
		return out
	}
	busy := ""
	for addr, n := range inflight() {
		if n == 1 {
			busy = addr
		}
	}
	if busy == "" {
		t.Fatalf("no instance counts the open relay: %v", inflight())
	}
	// The other instance is the least loaded, so it gets the handshakes
	// that come meanwhile (each then counted in turn, so alternate).
	other := gatewaytest.Dial(t, g.Addr)
	gatewaytest.Write(t, other, strings.Replace(wsHandshake, "%s", "/ws", 1))
	switched(t, other, bufio.NewReader(other))
	for addr, n := range inflight() {
		if n != 1 {
			t.Fatalf("the second relay did not go to the idle instance: %v (first on %s, now %s)", inflight(), busy, addr)
		}
	}
	conn.Close()
	other.Close()
	deadline := time.Now().Add(3 * time.Second)
	for {
		total := int64(0)
		for _, n := range inflight() {
			total += n
		}
		if total == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("relays ended but still counted: %v", inflight())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWebSocketStalledClientHoldsNoLoop: a client that keeps sending on a
// relay to an echo backend and never reads fills every buffer on the way
// back; the relay then waits on the loop like any fiber, and the loop (the
// only one here) goes on serving other connections.
func TestWebSocketStalledClientHoldsNoLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("stalls a client for seconds")
	}
	up := wsUpstream(t)
	yaml := strings.Replace(wsConfig, "idle_timeout: 400ms", "idle_timeout: 10s", 1)
	g := gatewaytest.Start(t, yaml, gatewaytest.Options{Vars: map[string]string{"UP": up}, Tweak: func(o *server.Options) { o.Workers = 1 }})
	conn := gatewaytest.Dial(t, g.Addr)
	gatewaytest.Write(t, conn, strings.Replace(wsHandshake, "%s", "/ws", 1))
	switched(t, conn, bufio.NewReader(conn))
	sent := make(chan int64, 1)
	go func() {
		chunk := bytes.Repeat([]byte("z"), 64<<10)
		var n int64
		_ = conn.SetWriteDeadline(time.Now().Add(3 * time.Second))
		for range 2048 { // 128 MiB: far more than the socket buffers both ways hold
			m, err := conn.Write(chunk)
			n += int64(m)
			if err != nil {
				break
			}
		}
		sent <- n
	}()
	if n := <-sent; n >= 2048*64<<10 {
		t.Fatalf("all %d bytes were taken: the echo never backed up", n)
	}
	other := gatewaytest.Dial(t, g.Addr)
	start := time.Now()
	gatewaytest.Write(t, other, "GET /plain HTTP/1.1\r\nHost: x\r\n\r\n")
	resp := gatewaytest.ReadAnswer(t, other, bufio.NewReader(other), false)
	if took := time.Since(start); resp.StatusCode() != 400 || took > 2*time.Second {
		t.Fatalf("another client on the loop: %d after %v", resp.StatusCode(), took)
	}
}
