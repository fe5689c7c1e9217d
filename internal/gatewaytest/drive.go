package gatewaytest

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/valyala/fasthttp"
)

// Result is what clients saw of a run of requests (Drive).
type Result struct {
	Statuses  map[int]int
	Latencies []time.Duration
	Errors    int
}

// P99 is the 99th percentile of the answered requests' latencies.
func (r Result) P99() time.Duration {
	s := slices.Clone(r.Latencies)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)*99/100]
}

// Drive sends n requests to addr from clients concurrent clients, each
// request made by prepare, and reports what they got.
func Drive(tb testing.TB, addr string, n, clients int, prepare func(i int, req *fasthttp.Request)) Result {
	tb.Helper()
	return DriveWithin(tb, addr, n, clients, 5*time.Second, prepare)
}

// DriveWithin is Drive with a client timeout per request. A run that
// failed once has failed: the requests not yet sent are not sent.
func DriveWithin(tb testing.TB, addr string, n, clients int, timeout time.Duration, prepare func(i int, req *fasthttp.Request)) Result {
	tb.Helper()
	var mu sync.Mutex
	var giveUp atomic.Bool
	res := Result{Statuses: map[int]int{}}
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
					continue
				}
				req.Reset()
				req.SetRequestURI("http://" + addr + "/")
				prepare(i, &req)
				start := time.Now()
				err := hc.Do(&req, &resp)
				took := time.Since(start)
				mu.Lock()
				if err != nil {
					res.Errors++
					giveUp.Store(true)
				} else {
					res.Statuses[resp.StatusCode()]++
					res.Latencies = append(res.Latencies, took)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return res
}

// GetPath makes every request of a Drive a GET of path for Host api.test.
func GetPath(path string) func(int, *fasthttp.Request) {
	return func(_ int, req *fasthttp.Request) { req.SetRequestURI(path); req.Header.SetHost("api.test") }
}

// Filter returns the route's filter of type T in g's live snapshot.
func Filter[T any](tb testing.TB, g *Gateway, route string) T {
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

// CompileErr compiles yaml as the process would and returns its error.
func CompileErr(yaml string) error {
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
