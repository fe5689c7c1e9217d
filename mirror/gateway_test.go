package mirror

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/valyala/fasthttp"
)

// startGateway serves yaml, its ${NAME} references taken from vars, on a
// real gateway (with only the features this package registers).
func startGateway(tb testing.TB, yaml string, vars map[string]string) *gatewaytest.Gateway {
	tb.Helper()
	return gatewaytest.Start(tb, yaml, gatewaytest.Options{Vars: vars})
}

// filter returns the route's filter of type T.
func filter[T any](tb testing.TB, g *gatewaytest.Gateway, route string) T {
	tb.Helper()
	for _, r := range g.GW.Snapshot().Routes {
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
