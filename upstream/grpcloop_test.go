package upstream_test

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil/grpcorders"
	"github.com/tollgate/tollgate/server"
)

// TestGRPCOnTheLoopManyCallsAtOnce: one event loop, 40 clients calling at
// once through one h2c connection to the backend: every reply goes to the
// call it answers, and a call that hangs ends at its budget (504) while the
// others are answered around it.
func TestGRPCOnTheLoopManyCallsAtOnce(t *testing.T) {
	be := grpcorders.Start(t)
	g := gatewaytest.Start(t, grpcRoutes, gatewaytest.Options{Vars: map[string]string{"UP": be.Addr, "PB": ordersPB(t)},
		Tweak: func(o *server.Options) { o.Workers = 1 }})
	var wg sync.WaitGroup
	errs := make(chan string, 400)
	hungAt := time.Now()
	var hungTook time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		st, _, raw := doJSON(t, g.Addr, "POST", "/v1/orders", "application/json", `{"sku":"hang","quantity":1}`)
		hungTook = time.Since(hungAt)
		if st != 504 {
			errs <- fmt.Sprintf("hang: %d %s", st, raw)
		}
	}()
	for w := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				sku := fmt.Sprintf("s%d-%d", w, i)
				st, body, raw := doJSON(t, g.Addr, "POST", "/v1/orders", "application/json", `{"sku":"`+sku+`","quantity":1}`)
				if st != 200 || body["id"] != "o-"+sku {
					errs <- fmt.Sprintf("%s: %d %s", sku, st, raw)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if hungTook > 2*time.Second {
		t.Errorf("the hung call took %v with a 400 ms budget", hungTook)
	}
	if n := be.Calls.Load(); n < 401 {
		t.Fatalf("the backend saw %d calls", n)
	}
}

// TestGRPCOnTheLoopBackendRestarts: calls on a loop's connection to a
// backend that stops fail as UNAVAILABLE (503), not hang; once it is back
// the next calls dial again and are answered.
func TestGRPCOnTheLoopBackendRestarts(t *testing.T) {
	be := grpcorders.Start(t)
	g := gatewaytest.Start(t, grpcRoutes, gatewaytest.Options{Vars: map[string]string{"UP": be.Addr, "PB": ordersPB(t)},
		Tweak: func(o *server.Options) { o.Workers = 1 }})
	body := `{"sku":"abc","quantity":1}`
	if st, _, raw := doJSON(t, g.Addr, "POST", "/v1/orders", "application/json", body); st != 200 {
		t.Fatalf("%d %s", st, raw)
	}
	be.Stop()
	start := time.Now()
	if st, _, raw := doJSON(t, g.Addr, "POST", "/v1/orders", "application/json", body); st != 503 || time.Since(start) > time.Second {
		t.Fatalf("backend gone: %d %s after %v", st, raw, time.Since(start))
	}
	be2 := grpcorders.StartOn(t, mustListen(t, be.Addr))
	defer be2.Stop()
	var st int
	var raw string
	for try := 0; try < 20; try++ {
		if st, _, raw = doJSON(t, g.Addr, "POST", "/v1/orders", "application/json", body); st == 200 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st != 200 || be2.Calls.Load() == 0 {
		t.Fatalf("after the restart: %d %s, %d calls", st, raw, be2.Calls.Load())
	}
}

func mustListen(t *testing.T, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	var err error
	for try := 0; try < 50; try++ { // the stopped server's port may linger a moment
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal(err)
	return nil
}

// TestGRPCOnTheLoopLargeMessages: request messages many times the
// backend's 64 KiB windows are sent on the loop as the backend opens its
// windows, several at once on one connection, each answered whole.
func TestGRPCOnTheLoopLargeMessages(t *testing.T) {
	be := grpcorders.Start(t)
	g := gatewaytest.Start(t, grpcRoutes, gatewaytest.Options{Vars: map[string]string{"UP": be.Addr, "PB": ordersPB(t)},
		Tweak: func(o *server.Options) { o.Workers = 1 }})
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			customer := strings.Repeat(string(rune('a'+w)), 300<<10)
			sku := fmt.Sprintf("big-%d", w)
			st, body, raw := doJSON(t, g.Addr, "POST", "/v1/orders", "application/json",
				`{"sku":"`+sku+`","quantity":1,"customerId":"`+customer+`"}`)
			if st != 200 || body["id"] != "o-"+sku || body["customerId"] != customer {
				errs <- fmt.Sprintf("%s: %d %.200s", sku, st, raw)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if ua := be.LastMetadata()["user-agent"]; len(ua) != 1 || ua[0] != "tollgate" {
		t.Fatalf("the calls were not made on the loop: user-agent %q", ua)
	}
}
