package reactor_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/server"
	"github.com/valyala/fasthttp"
)

// TestFibersKeepNothingOfTheirLastRequest: on one event loop, fibers keep
// their buffers and their request context from one connection to the next
// (instead of pools). With many requests in flight and answers that come
// back out of order, every request must reach the backend with its own
// target and fields, and every client must get its own answer and trace:
// nothing of the request a fiber or a context served before.
func TestFibersKeepNothingOfTheirLastRequest(t *testing.T) {
	// The backend echoes what it got, after a random pause, so that the
	// loop's fibers finish in another order than they began.
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(rc *fasthttp.RequestCtx) {
		time.Sleep(time.Duration(rand.IntN(1500)) * time.Microsecond)
		fmt.Fprintf(rc, "%s|%s|%s|%s", rc.RequestURI(), rc.Request.Header.Peek("X-Request-Id"),
			rc.Request.Header.Peek("X-Tag"), rc.Request.Header.Peek("X-Only-Even"))
	}}
	go func() { _ = srv.Serve(up) }()
	t.Cleanup(func() { _ = srv.Shutdown() })

	g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Vars: map[string]string{"UP": up.Addr().String()}, Tweak: func(o *server.Options) { o.Workers = 1 }})

	const clients, rounds = 24, 30
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each round a new connection for some clients (which ask for
			// it to close), the same one for the others: fibers move
			// between connections both ways.
			var conn net.Conn
			var br *bufio.Reader
			defer func() {
				if conn != nil {
					conn.Close()
				}
			}()
			for r := range rounds {
				if conn == nil || cl%3 == 0 {
					if conn != nil {
						conn.Close()
					}
					c, err := net.Dial("tcp", g.Addr)
					if err != nil {
						errs <- err
						return
					}
					conn = c
					br = bufio.NewReader(conn)
				}
				id := fmt.Sprintf("%08x%08x%016x", cl, r, cl*1000+r)
				tag := strings.Repeat(string(rune('a'+cl%26)), 1+(cl+r)%40)
				path := fmt.Sprintf("/c%d/r%d?q=%d", cl, r, r)
				even := ""
				raw := "GET " + path + " HTTP/1.1\r\nHost: h\r\nX-Request-Id: " + id + "\r\nX-Tag: " + tag + "\r\n"
				if r%2 == 0 { // a field only some requests carry
					even = "yes-" + id
					raw += "X-Only-Even: " + even + "\r\n"
				}
				if cl%3 == 0 { // its connection ends with the answer; the others' must not
					raw += "Connection: close\r\n"
				}
				if _, err := conn.Write([]byte(raw + "\r\n")); err != nil {
					errs <- err
					return
				}
				var resp fasthttp.Response
				if err := resp.Read(br); err != nil {
					errs <- fmt.Errorf("client %d round %d: %v", cl, r, err)
					return
				}
				want := path + "|" + id + "|" + tag + "|" + even
				if got := string(resp.Body()); resp.StatusCode() != 200 || got != want {
					errs <- fmt.Errorf("client %d round %d: %d %q, want %q", cl, r, resp.StatusCode(), got, want)
					return
				}
				if closing := resp.ConnectionClose(); closing != (cl%3 == 0) {
					errs <- fmt.Errorf("client %d round %d: connection close %v, want %v", cl, r, closing, cl%3 == 0)
					return
				}
				if got := string(resp.Header.Peek("X-Request-Id")); got != id {
					errs <- fmt.Errorf("client %d round %d: answer's X-Request-Id %q, want %q", cl, r, got, id)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
