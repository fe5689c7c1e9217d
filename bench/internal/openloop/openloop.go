// Package openloop holds what the open-loop (constant-rate) load generators
// of the benchmarks share: the checks on their common settings, the
// schedule that paces the requests, the fixed worker pool that sends them
// and the HTTP client they use.
//
// Open loop: request i is due at t0 + i/rate, whatever happened to earlier
// requests. A fixed pool of workers takes the next index, waits until that
// request is due and sends it. When every worker is busy, the next request
// simply goes out late; how late is for the caller to account (the schedule
// hands out both the due time and the actual one). The number of goroutines
// never grows with the load.
package openloop

import (
	"errors"
	"math"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Check returns the first setting out of range among those every
// generator takes, in this order: the rate, the measured duration, the
// warm-up, the connection limit and the per-request timeout. The errors name
// the flags (-rate, -duration, -warmup, -conns, -timeout).
func Check(rate float64, duration, warmup time.Duration, conns int, timeout time.Duration) error {
	switch {
	case rate <= 0:
		return errors.New("-rate must be > 0")
	case duration <= 0:
		return errors.New("-duration must be > 0")
	case warmup < 0:
		return errors.New("-warmup must be >= 0")
	case conns <= 0:
		return errors.New("-conns must be > 0")
	case timeout <= 0:
		return errors.New("-timeout must be > 0")
	}
	return nil
}

// Requests returns how many requests a run at rate makes during warmup
// (rounded) and in all, warm-up included; the measured window has at least
// one request.
func Requests(rate float64, warmup, duration time.Duration) (warm, total int64) {
	warm = int64(math.Round(rate * warmup.Seconds()))
	return warm, warm + max(1, int64(math.Round(rate*duration.Seconds())))
}

// Schedule paces total requests at a constant rate. Request 0 is due 20 ms
// after NewSchedule returns; no request is handed out after the hard stop,
// grace after the last one was due. Its methods are safe for concurrent use.
type Schedule struct {
	start, stop time.Time
	nsPerReq    float64
	total       int64
	slack       time.Duration
	next        atomic.Int64
}

// NewSchedule returns the schedule of total requests at rate requests per
// second. Workers wake up to slack before a request is due, to absorb timer
// granularity; 0 is strict.
func NewSchedule(rate float64, total int64, grace, slack time.Duration) *Schedule {
	s := &Schedule{nsPerReq: 1e9 / rate, total: total, slack: slack}
	s.start = time.Now().Add(20 * time.Millisecond)
	s.stop = s.start.Add(s.Offset(total) + grace)
	return s
}

// Start returns t0, when request 0 is due.
func (s *Schedule) Start() time.Time { return s.start }

// Offset returns when request i is due, counted from t0. Offset(total) is
// the length of the schedule.
func (s *Schedule) Offset(i int64) time.Duration {
	return time.Duration(float64(i) * s.nsPerReq)
}

// Next claims the next request and waits until it is due (less the slack).
// It returns the request's index, when it was due and the time after the
// wait (read again only when it slept), which is when the caller sends it.
// ok is false when every request has been claimed or the hard stop is past:
// the worker should return, and the requests not claimed stay unsent.
func (s *Schedule) Next() (i int64, due, now time.Time, ok bool) {
	i = s.next.Add(1) - 1
	if i >= s.total {
		return i, due, now, false
	}
	due = s.start.Add(s.Offset(i))
	now = time.Now()
	if now.After(s.stop) {
		return i, due, now, false
	}
	if d := due.Sub(now) - s.slack; d > 0 {
		time.Sleep(d)
		now = time.Now()
	}
	return i, due, now, true
}

// Go starts a fixed pool of n workers, each running work, and returns a
// channel closed once all of them have returned.
func Go(n int, work func()) <-chan struct{} {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work()
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}

// WithGET runs f with a GET request for uri and a response, both pooled by
// fasthttp and released when f returns; f owns them meanwhile. A worker
// calls it once and sends every request it claims with them.
func WithGET(uri string, f func(req *fasthttp.Request, resp *fasthttp.Response)) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(uri)
	req.Header.SetMethod(fasthttp.MethodGet)
	f(req, resp)
}

// StoreMax raises v to x when x is larger, atomically.
func StoreMax(v *atomic.Int64, x int64) {
	for {
		old := v.Load()
		if x <= old || v.CompareAndSwap(old, x) {
			return
		}
	}
}

// HostPort returns the host and port to dial for u, port 80 when u has none.
func HostPort(u *url.URL) string {
	if u.Port() == "" {
		return u.Host + ":80"
	}
	return u.Host
}

// NewClient returns the client a generator sends with: at most conns
// connections to addr, timeout on waiting for a free connection, on reading
// and on writing, no retries, and idle connections kept for a minute. name
// is the User-Agent.
func NewClient(name, addr string, conns int, timeout time.Duration) *fasthttp.HostClient {
	return &fasthttp.HostClient{
		Addr:                      addr,
		Name:                      name,
		MaxConns:                  conns,
		MaxConnWaitTimeout:        timeout,
		ReadTimeout:               timeout,
		WriteTimeout:              timeout,
		MaxIdemponentCallAttempts: 1,
		MaxIdleConnDuration:       time.Minute,
	}
}
