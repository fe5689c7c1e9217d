package concurrency_test

import (
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adaptive"
	"github.com/tollgate/tollgate/bench/internal/openloop"
	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

// slottedUpstream is a real backend on loopback that serves slots
// requests at a time, each for service; the others queue in it, as in a
// thread pool. Its slots change while it runs.
type slottedUpstream struct {
	Addr    string
	service time.Duration

	mu    sync.Mutex
	free  *sync.Cond
	busy  int
	slots int
}

func startSlotted(tb testing.TB, slots int, service time.Duration) *slottedUpstream {
	tb.Helper()
	u := &slottedUpstream{service: service, slots: slots}
	u.free = sync.NewCond(&u.mu)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: u.serve, Concurrency: 1 << 16}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Shutdown() })
	u.Addr = ln.Addr().String()
	return u
}

func (u *slottedUpstream) serve(ctx *fasthttp.RequestCtx) {
	u.mu.Lock()
	for u.busy >= u.slots {
		u.free.Wait()
	}
	u.busy++
	u.mu.Unlock()
	time.Sleep(u.service)
	u.mu.Lock()
	u.busy--
	u.free.Signal()
	u.mu.Unlock()
	ctx.SetBodyString("ok")
}

// setSlots changes the backend's capacity.
func (u *slottedUpstream) setSlots(n int) {
	u.mu.Lock()
	u.slots = n
	u.free.Broadcast()
	u.mu.Unlock()
}

// loadResult is what an open-loop run saw.
type loadResult struct {
	Sent, OK, Refused, Other int
	// Duration is from the first request due to the last answer: past
	// the offered length when answers come late.
	Duration time.Duration
	// OKLatency is from when each request was due (so lateness of the
	// generator counts), Refusal from when it was sent.
	OKLatency, Refusal []time.Duration
}

func (r *loadResult) goodput() float64 { return float64(r.OK) / r.Duration.Seconds() }

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// offer sends GET path at rate for d, in an open loop (openloop.Schedule)
// from workers workers; at is called with the elapsed time every 100 ms.
func offer(tb testing.TB, addr, path string, rate float64, d time.Duration, workers int, timeout time.Duration, at func(time.Duration)) *loadResult {
	tb.Helper()
	return offerMixed(tb, addr, []string{path}, func(int64) int { return 0 }, nil, rate, d, workers, timeout, at)[0]
}

// offerMixed is offer with request i sent to paths[pick(i)], made by
// prepare when not nil (a GET otherwise); it returns what each path saw.
func offerMixed(tb testing.TB, addr string, paths []string, pick func(int64) int, prepare func(*fasthttp.Request), rate float64, d time.Duration, workers int,
	timeout time.Duration, at func(time.Duration)) []*loadResult {
	tb.Helper()
	_, total := openloop.Requests(rate, 0, d)
	client := openloop.NewClient("adaptive-test", addr, workers, timeout)
	sched := openloop.NewSchedule(rate, total, timeout, time.Millisecond)
	var mu sync.Mutex
	results := make([]*loadResult, len(paths))
	for i := range results {
		results[i] = &loadResult{}
	}
	var last time.Time
	stop := make(chan struct{})
	var ticks sync.WaitGroup
	if at != nil {
		ticks.Add(1)
		go func() {
			defer ticks.Done()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					at(time.Since(sched.Start()))
				}
			}
		}()
	}
	done := openloop.Go(workers, func() {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		if prepare != nil {
			prepare(req)
		}
		for {
			i, due, now, ok := sched.Next()
			if !ok {
				return
			}
			p := pick(i)
			req.SetRequestURI("http://" + addr + paths[p])
			err := client.DoTimeout(req, resp, timeout)
			end := time.Now()
			mu.Lock()
			res := results[p]
			res.Sent++
			if end.After(last) {
				last = end
			}
			switch {
			case err == nil && resp.StatusCode() == 200:
				res.OK++
				res.OKLatency = append(res.OKLatency, end.Sub(due))
			case err == nil && resp.StatusCode() == 503 && gatewaytest.HasJSONCode(resp.Body(), "503") &&
				string(resp.Header.Peek("Retry-After")) != "":
				res.Refused++
				res.Refusal = append(res.Refusal, end.Sub(now))
			default:
				res.Other++
			}
			mu.Unlock()
		}
	})
	<-done
	close(stop)
	ticks.Wait()
	for _, res := range results {
		res.Duration = max(d, last.Sub(sched.Start()))
	}
	return results
}

// gateStatus reads a service's gate from the running snapshot.
func gateStatus(g *gatewaytest.Gateway, service string) adaptive.Status {
	var out adaptive.Status
	g.GW.Snapshot().Inspectors(func(_ string, in pipeline.Inspector) {
		in.Inspect(func(kind string, state any) {
			if st, ok := state.(adaptive.Status); ok && kind == "concurrency" && st.Name == service {
				out = st
			}
		})
	})
	return out
}
