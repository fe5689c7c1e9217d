package upstream_test

import (
	"bufio"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/server"
	"github.com/tollgate/tollgate/upstream"
	"github.com/valyala/fasthttp"
)

// idleBackend is a backend whose idle connections end after idleFor. The
// first hangUpFirst connections it closes then, as a server's keep-alive
// timer does; on later ones it drops a request that comes on a connection
// idle that long, unanswered, as a request crossing the backend's close is
// lost. It answers
// with extra fields (a Keep-Alive field, say) and, with chunked, a
// chunked body (an answer the loop's reading leaves to fasthttp).
type idleBackend struct {
	ln          net.Listener
	idleFor     time.Duration
	fields      string
	chunked     bool
	hangUpFirst int64
	accepted    atomic.Int64
	lost        atomic.Int64 // requests dropped unanswered
}

func startIdleBackend(t *testing.T, idleFor time.Duration, hangUpFirst int64, fields string, chunked bool) *idleBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	b := &idleBackend{ln: ln, idleFor: idleFor, hangUpFirst: hangUpFirst, fields: fields, chunked: chunked}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := b.accepted.Add(1)
			go b.serve(c, n <= b.hangUpFirst)
		}
	}()
	return b
}

func (b *idleBackend) serve(c net.Conn, hangUp bool) {
	defer c.Close()
	br := bufio.NewReader(c)
	answered := time.Time{}
	for {
		if hangUp && !answered.IsZero() {
			_ = c.SetReadDeadline(answered.Add(b.idleFor))
		}
		var req fasthttp.Request
		if err := req.Read(br); err != nil {
			return // hung up at idleFor, or the gateway closed it
		}
		if !answered.IsZero() && time.Since(answered) >= b.idleFor {
			b.lost.Add(1)
			return
		}
		answer := "HTTP/1.1 200 OK\r\n" + b.fields + "Content-Length: 2\r\n\r\nok"
		if b.chunked {
			answer = "HTTP/1.1 200 OK\r\n" + b.fields + "Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"
		}
		if _, err := io.WriteString(c, answer); err != nil {
			return
		}
		answered = time.Now()
	}
}

// postAfterIdle waits idle, then POSTs through the gateway at addr: a
// request that is never sent again, so it must go on a connection the
// backend still keeps.
func (b *idleBackend) postAfterIdle(t *testing.T, addr string, idle time.Duration) {
	t.Helper()
	time.Sleep(idle)
	if st, _ := idleGatewayCall(t, addr, "POST"); st != 200 || b.lost.Load() != 0 {
		t.Fatalf("POST after %v idle: status %d; the backend lost %d requests sent on connections idle past its timeout",
			idle, st, b.lost.Load())
	}
}

// idleGatewayCall sends one request through the gateway and returns its
// status and the Keep-Alive field the client got.
func idleGatewayCall(t *testing.T, addr, method string) (int, string) {
	t.Helper()
	var req fasthttp.Request
	var resp fasthttp.Response
	req.SetRequestURI("http://" + addr + "/x")
	req.Header.SetMethod(method)
	if err := fasthttp.DoTimeout(&req, &resp, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode(), string(resp.Header.Peek("Keep-Alive"))
}

// TestPoolKeepsBelowAnnouncedKeepAlive: a backend that answers with
// Keep-Alive: timeout=2 (after a field saying 60) loses a request sent on a
// connection idle 2 s. With idle_conn unset (up to 60 s), the pools keep
// such a connection a little less than 2 s, so a POST after 2.2 s goes on a
// new connection and is answered; the field itself does not reach the
// client. On the event loops both ways of reading an answer are held to
// it: the common one read on the loop, and a chunked one read by
// fasthttp. The other transports go through fasthttp's client.
func TestPoolKeepsBelowAnnouncedKeepAlive(t *testing.T) {
	if testing.Short() {
		t.Skip("idles past the announced keep-alive")
	}
	for _, kind := range gatewaytest.Transports {
		for _, chunked := range []bool{false, true} {
			name := kind + "/" + map[bool]string{false: "length", true: "chunked"}[chunked]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				// Two fields, in two spellings: the shorter timeout holds.
				b := startIdleBackend(t, 2*time.Second, 0, "keep-alive: timeout=60\r\nKEEP-ALIVE: timeout=2, max=100\r\n", chunked)
				g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": b.ln.Addr().String()}, Tweak: func(o *server.Options) { o.Workers = 1 }})
				for range 3 {
					st, ka := idleGatewayCall(t, g.Addr, "GET")
					if st != 200 || ka != "" {
						t.Fatalf("GET: status %d, Keep-Alive %q passed to the client", st, ka)
					}
				}
				if n := b.accepted.Load(); n != 1 {
					t.Fatalf("3 GETs in a row took %d connections, want 1 kept alive", n)
				}
				b.postAfterIdle(t, g.Addr, 2200*time.Millisecond)
			})
		}
	}
}

// TestPoolStreamedBodyAfterAnnouncedKeepAlive: a request whose body
// streams to the backend (over client.stream_body_bytes, 1 MiB), after an
// idle pause past the backend's announced timeout, goes on a connection
// the backend still keeps and is answered: the kept one is not used, and
// refusing it costs the request nothing.
func TestPoolStreamedBodyAfterAnnouncedKeepAlive(t *testing.T) {
	if testing.Short() {
		t.Skip("idles past the announced keep-alive")
	}
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := startIdleBackend(t, 2*time.Second, 0, "Keep-Alive: timeout=2\r\n", false)
			g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": b.ln.Addr().String()}, Tweak: func(o *server.Options) { o.Workers = 1 }})
			if st, _ := idleGatewayCall(t, g.Addr, "GET"); st != 200 {
				t.Fatalf("GET: status %d", st)
			}
			time.Sleep(2200 * time.Millisecond)
			var req fasthttp.Request
			var resp fasthttp.Response
			req.SetRequestURI("http://" + g.Addr + "/x")
			req.Header.SetMethod("POST")
			req.SetBody(make([]byte, 1<<20+1))
			if err := fasthttp.DoTimeout(&req, &resp, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			if st := resp.StatusCode(); st != 200 || b.lost.Load() != 0 {
				t.Fatalf("streamed POST after 2.2 s idle: status %d, %d requests lost", st, b.lost.Load())
			}
		})
	}
}

// TestPoolLearnsTheBackendsIdleClose: a backend that closes idle
// connections after 1.5 s without saying so is seen doing it; afterwards
// the pool does not send a request on a connection idle that long, even
// when the backend's close has not been seen yet (here it never comes:
// the request would be lost, as one crossing the close is). The event
// loops see the close as it comes, and learn 1.5 s less the margin.
// fasthttp's client finds it when it next takes the connection, here
// after 2 s: it learns 2 s less the margin, an upper bound, and a
// connection idle 1.9 s must not carry a request.
func TestPoolLearnsTheBackendsIdleClose(t *testing.T) {
	if testing.Short() {
		t.Skip("idles past the backend's close")
	}
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := startIdleBackend(t, 1500*time.Millisecond, 1, "", false)
			g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": b.ln.Addr().String()}, Tweak: func(o *server.Options) { o.Workers = 1 }})
			if st, _ := idleGatewayCall(t, g.Addr, "GET"); st != 200 {
				t.Fatalf("GET: status %d", st)
			}
			time.Sleep(2 * time.Second) // the backend closes the connection at 1.5 s
			if st, _ := idleGatewayCall(t, g.Addr, "POST"); st != 200 {
				t.Fatalf("POST after the backend closed the kept connection: status %d", st)
			}
			if n := b.accepted.Load(); n != 2 {
				t.Fatalf("%d connections, want a second one after the backend's close", n)
			}
			lo, hi := time.Second, 1300*time.Millisecond // 1.5 s less its margin
			if kind != "reactor" {
				lo, hi = 1700*time.Millisecond, 1800*time.Millisecond // 2 s less its margin
			}
			learned := upstream.ServicesOf(g.GW.Snapshot().Env())["up"].Instances()[0].Status().IdleLearned
			if d, err := time.ParseDuration(learned); err != nil || d < lo || d > hi {
				t.Fatalf("the instance's status gives %q learned, want %v to %v", learned, lo, hi)
			}

			// The backend's close of the second connection never comes in time.
			b.postAfterIdle(t, g.Addr, 1900*time.Millisecond)
			if n := b.accepted.Load(); n != 3 {
				t.Fatalf("%d connections, want a third one", n)
			}
		})
	}
}

// TestPoolKeepsConnectionsPastFourSeconds: with idle_conn unset the pools
// keep a connection to a backend that neither announces nor shows an idle
// timeout longer than the 4 s they were once limited to, so a burst's
// connections are there for the next one.
func TestPoolKeepsConnectionsPastFourSeconds(t *testing.T) {
	if testing.Short() {
		t.Skip("idles 4.5 s")
	}
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := startIdleBackend(t, time.Hour, 0, "", false)
			g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": b.ln.Addr().String()}, Tweak: func(o *server.Options) { o.Workers = 1 }})
			if st, _ := idleGatewayCall(t, g.Addr, "GET"); st != 200 {
				t.Fatalf("GET: status %d", st)
			}
			time.Sleep(4500 * time.Millisecond)
			if st, _ := idleGatewayCall(t, g.Addr, "GET"); st != 200 {
				t.Fatalf("GET: status %d", st)
			}
			if n := b.accepted.Load(); n != 1 {
				t.Fatalf("%d connections, want the first kept past 4.5 s", n)
			}
		})
	}
}
