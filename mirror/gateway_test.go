package mirror

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/server"
	"github.com/valyala/fasthttp"
)

// gateway is a real gateway on a loopback socket, serving a configuration
// compiled here (only the features this package registers).
type gateway struct {
	addr string
	gw   *server.Gateway
}

func startGateway(tb testing.TB, yaml string, vars map[string]string) *gateway {
	tb.Helper()
	for k, v := range vars {
		yaml = strings.ReplaceAll(yaml, "${"+k+"}", v)
	}
	comp := config.NewCompiler()
	f, err := config.Parse("test.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		tb.Fatal(err)
	}
	f.Defaults()
	snap, err := comp.Compile(f, "test.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	comp.Release(snap)
	gw := server.NewGateway(snap, nil)
	tr, err := server.NewTransport("netpoll", gw, server.OptionsFor(f))
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tr.Serve(ln) }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
		<-done
		comp.Close()
	})
	return &gateway{addr: ln.Addr().String(), gw: gw}
}

// filter returns the route's filter of type T.
func filter[T any](tb testing.TB, g *gateway, route string) T {
	tb.Helper()
	for _, r := range g.gw.Snapshot().Routes {
		if r.Name != route {
			continue
		}
		for _, f := range r.Chain.Filters() {
			if v, ok := f.(T); ok {
				return v
			}
		}
	}
	var zero T
	tb.Fatalf("route %s has no %T", route, zero)
	return zero
}

// result is what clients saw of a run of requests.
type result struct {
	statuses  map[int]int
	latencies []time.Duration
	errors    int
}

func (r result) p99() time.Duration {
	s := slices.Clone(r.latencies)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)*99/100]
}

// drive sends n requests from clients concurrent clients, each made by
// prepare, and reports what they got.
func drive(tb testing.TB, addr string, n, clients int, prepare func(i int, req *fasthttp.Request)) result {
	tb.Helper()
	return driveWithin(tb, addr, n, clients, 5*time.Second, prepare)
}

// driveWithin is drive with a client timeout per request.
func driveWithin(tb testing.TB, addr string, n, clients int, timeout time.Duration, prepare func(i int, req *fasthttp.Request)) result {
	tb.Helper()
	var mu sync.Mutex
	var giveUp atomic.Bool
	res := result{statuses: map[int]int{}}
	var wg sync.WaitGroup
	next := make(chan int)
	go func() {
		for i := range n {
			next <- i
		}
		close(next)
	}()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := &fasthttp.HostClient{Addr: addr, ReadTimeout: timeout, MaxIdemponentCallAttempts: 1}
			var req fasthttp.Request
			var resp fasthttp.Response
			for i := range next {
				if giveUp.Load() {
					continue // a run that failed once has failed: do not wait on the rest
				}
				req.Reset()
				req.SetRequestURI("http://" + addr + "/")
				prepare(i, &req)
				start := time.Now()
				err := hc.Do(&req, &resp)
				took := time.Since(start)
				mu.Lock()
				if err != nil {
					res.errors++
					giveUp.Store(true)
				} else {
					res.statuses[resp.StatusCode()]++
					res.latencies = append(res.latencies, took)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return res
}

func getPath(path string) func(int, *fasthttp.Request) {
	return func(_ int, req *fasthttp.Request) { req.SetRequestURI(path); req.Header.SetHost("api.test") }
}

// compileErr compiles yaml and returns its error.
func compileErr(yaml string) error {
	comp := config.NewCompiler()
	defer comp.Close()
	f, err := config.Parse("test.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		return err
	}
	f.Defaults()
	snap, err := comp.Compile(f, "test.yaml")
	if err == nil {
		comp.Discard(snap)
	}
	return err
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
