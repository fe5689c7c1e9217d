// Command loadgen is an open-loop (constant-rate) HTTP load generator.
//
// Request i is due at t0 + i/rate, whatever happened to earlier requests.
// A fixed pool of workers takes the next index, sleeps until that request's
// intended time, sends it and records two latencies:
//
//   - corrected: response time minus the INTENDED send time. When the server
//     (or the generator) falls behind, requests go out late and the delay is
//     charged to the server, so there is no coordinated omission;
//   - service: response time minus the ACTUAL send time (what closed-loop
//     generators such as wrk report).
//
// Quantiles are exact: every sample is kept and sorted. The worker pool is
// fixed, so goroutines never grow without bound; if every worker is busy,
// the next request simply goes out late and its lateness shows up in the
// corrected latency. With -slack S a worker wakes up to S early to absorb
// timer granularity; a request that goes out early is then timed from its
// actual send, a late one still from its intended time.
//
// With -secret (or $LOADGEN_SECRET) every request is signed for the
// gateway's signature check, with a fresh nonce each (the query of -url is
// what is signed), so a route with auth: signature can be measured like a
// plain one.
//
// With -latencies FILE it also writes every answered request's latencies
// to FILE; -pool FILE... then prints the percentiles of several runs'
// requests together, one line starting with "POOLED".
//
// Output: one machine-readable line starting with "LOADGEN" (key=value
// pairs, latencies in ms) followed by one human-readable line. With
// -stalls MS it also lists the stalls: runs of requests, by due time,
// whose corrected latency passed MS, so that a tail can be told apart as
// a few long stalls (one 10 ms stall at 13,000 req/s delays 130 requests,
// more than 0.1 % of an 8 s run) or many short ones, and matched by time
// with what the server recorded.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"math"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/bench/internal/openloop"
	"github.com/tollgate/tollgate/bench/internal/signer"
	"github.com/tollgate/tollgate/sign"
	"github.com/valyala/fasthttp"
	"golang.org/x/sys/unix"
)

// Outcome of one scheduled request.
const (
	stUnsent uint8 = iota // never sent (hard stop reached)
	stOK                  // 2xx response
	stNon2xx              // response with a non-2xx status
	stError               // transport error or timeout
)

type config struct {
	rawURL   string
	rate     float64
	duration time.Duration
	warmup   time.Duration
	conns    int
	workers  int
	timeout  time.Duration
	grace    time.Duration
	slack    time.Duration
	label    string
	appKey   string
	secret   string
	stalls   time.Duration
	// latencies: write the answered requests' latencies there (pool.go).
	latencies string
}

func main() {
	var c config
	flag.StringVar(&c.rawURL, "url", "http://127.0.0.1:8080/", "target URL (http only)")
	flag.Float64Var(&c.rate, "rate", 13000, "offered load in requests per second")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "measured duration")
	flag.DurationVar(&c.warmup, "warmup", 2*time.Second, "warm-up at the same rate before measuring (samples discarded)")
	flag.IntVar(&c.conns, "conns", 64, "maximum TCP connections")
	flag.IntVar(&c.workers, "workers", 0, "worker goroutines (0 = 4 x conns)")
	flag.DurationVar(&c.timeout, "timeout", 5*time.Second, "per-request timeout (includes waiting for a free connection)")
	flag.DurationVar(&c.grace, "grace", 0, "after the schedule ends, stop sending new requests after this long (0 = timeout)")
	flag.DurationVar(&c.slack, "slack", 0, "wake this much before the intended time to absorb timer granularity (see README)")
	flag.StringVar(&c.label, "label", "", "label echoed in the output")
	flag.StringVar(&c.appKey, "app-key", "bench-app", "X-App-Key of signed requests")
	flag.StringVar(&c.secret, "secret", os.Getenv("LOADGEN_SECRET"), "sign every request with this app secret (default $LOADGEN_SECRET; empty: unsigned)")
	flag.DurationVar(&c.stalls, "stalls", 0, "also list the runs of requests whose corrected latency passed this (0 = none)")
	flag.StringVar(&c.latencies, "latencies", "", "also write the answered requests' latencies to this file, for -pool")
	pooled := flag.Bool("pool", false, "send nothing: print one POOLED line over the latency files named as arguments")
	flag.Parse()
	if *pooled {
		if err := pool(os.Stdout, c.label, flag.Args()); err != nil {
			log.Fatalf("loadgen: %v", err)
		}
		return
	}

	if err := c.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		flag.Usage()
		os.Exit(2)
	}
	res, err := run(c)
	if err != nil {
		log.Fatalf("loadgen: %v", err)
	}
	res.print(os.Stdout, c)
	if c.latencies != "" {
		if err := writeLatencies(c.latencies, res); err != nil {
			log.Fatalf("loadgen: %v", err)
		}
	}
}

func (c *config) validate() error {
	if err := openloop.Check(c.rate, c.duration, c.warmup, c.conns, c.timeout); err != nil {
		return err
	}
	if c.slack < 0 {
		return fmt.Errorf("-slack must be >= 0")
	}
	if c.workers <= 0 {
		c.workers = 4 * c.conns
	}
	if c.grace <= 0 {
		c.grace = c.timeout
	}
	total := c.rate * (c.warmup + c.duration).Seconds()
	if total > 200e6 {
		return fmt.Errorf("rate x duration is %.0f requests; refusing more than 200M samples", total)
	}
	return nil
}

type result struct {
	scheduled  int           // requests in the measured window
	ok         int           // 2xx
	non2xx     int           // other statuses
	errors     int           // transport errors and timeouts
	unsent     int           // never sent before the hard stop
	responses  int64         // responses received, warm-up included
	window     time.Duration // first intended time to last completion
	corrected  []int64       // ns, responses only (any status)
	service    []int64       // ns, responses only
	sendLag    []int64       // ns, actual send minus intended send (all sent)
	stalls     []stall       // with -stalls, in due order
	windowMono time.Duration // the measured window's start on CLOCK_MONOTONIC, to match the stalls with a trace
	firstError string
}

// stall is a run of measured requests whose corrected latency passed
// -stalls, requests due less than stallGap apart joined into one.
type stall struct {
	due      time.Duration // first request's due time, from the start of the measured window
	span     time.Duration // last request's due time minus the first's
	n        int           // requests in the run
	worst    time.Duration // longest corrected latency
	worstLag time.Duration // longest send lag: a generator that fell behind shows here
}

// stallGap joins slow requests into one stall when they were due this
// close: at 13,000 req/s it spans 26 requests.
const stallGap = 2 * time.Millisecond

func run(c config) (*result, error) {
	u, err := url.Parse(c.rawURL)
	if err != nil {
		return nil, fmt.Errorf("bad -url: %w", err)
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("only http:// URLs are supported, got %q", u.Scheme)
	}
	hc := openloop.NewClient("tollgate-loadgen", openloop.HostPort(u), c.conns, c.timeout)
	warmN, total := openloop.Requests(c.rate, c.warmup, c.duration)
	measN := total - warmN

	// Per measured request: status and latencies. Each index is written by
	// exactly one worker and read only after every worker is done, so no
	// locking.
	status := make([]uint8, measN)
	corr := make([]int64, measN)
	svc := make([]int64, measN)
	lag := make([]int64, measN)

	var (
		lastDone  atomic.Int64 // ns since t0 of the last measured completion
		responses atomic.Int64 // responses received, warm-up included
		errOnce   sync.Once
		firstErr  string
	)
	sched := openloop.NewSchedule(c.rate, total, c.grace, c.slack)
	t0 := sched.Start()

	var prefix []byte
	if c.secret != "" {
		var run [8]byte
		if _, err := rand.Read(run[:]); err != nil {
			return nil, err
		}
		prefix = append(hex.AppendEncode(nil, run[:]), '-')
	}
	<-openloop.Go(c.workers, func() {
		openloop.WithGET(c.rawURL, func(req *fasthttp.Request, resp *fasthttp.Response) {
			var sg *signer.Signer
			if prefix != nil {
				sg = signer.New(c.secret, u.RawQuery, prefix)
				req.Header.Set(sign.HeaderAppKey, c.appKey)
			}
			for {
				// Past the hard stop the rest stays unsent; counted below.
				i, intended, sent, ok := sched.Next()
				if !ok {
					return
				}
				if sg != nil {
					if err := sg.Set(req, uint64(i), time.Now().Unix(), nil); err != nil {
						errOnce.Do(func() { firstErr = err.Error() })
						return
					}
				}
				// A request sent early (within -slack) is timed from its
				// actual send; a late one from its intended time.
				start := intended
				if sent.Before(intended) {
					start = sent
				}
				err := hc.DoTimeout(req, resp, c.timeout)
				done := time.Now()
				if err == nil {
					responses.Add(1)
				}
				if i < warmN {
					continue
				}
				j := i - warmN
				lag[j] = int64(sent.Sub(intended))
				if err != nil {
					status[j] = stError
					errOnce.Do(func() { firstErr = err.Error() })
				} else {
					if sc := resp.StatusCode(); sc >= 200 && sc < 300 {
						status[j] = stOK
					} else {
						status[j] = stNon2xx
					}
					corr[j] = int64(done.Sub(start))
					svc[j] = int64(done.Sub(sent))
				}
				openloop.StoreMax(&lastDone, int64(done.Sub(t0)))
			}
		})
	})
	hc.CloseIdleConnections()

	r := &result{scheduled: int(measN), firstError: firstErr, responses: responses.Load()}
	r.corrected = make([]int64, 0, measN)
	r.service = make([]int64, 0, measN)
	r.sendLag = make([]int64, 0, measN)
	for j := range status {
		switch status[j] {
		case stUnsent:
			r.unsent++
			continue
		case stOK:
			r.ok++
		case stNon2xx:
			r.non2xx++
		case stError:
			r.errors++
			r.sendLag = append(r.sendLag, lag[j])
			continue
		}
		r.corrected = append(r.corrected, corr[j])
		r.service = append(r.service, svc[j])
		r.sendLag = append(r.sendLag, lag[j])
	}
	r.window = time.Duration(lastDone.Load()) - sched.Offset(warmN)
	if c.stalls > 0 {
		r.windowMono = monotonicNow() - time.Since(t0.Add(sched.Offset(warmN)))
		r.stalls = stallsOf(corr, lag, func(j int) time.Duration { return sched.Offset(warmN+int64(j)) - sched.Offset(warmN) }, c.stalls)
	}
	slices.Sort(r.corrected)
	slices.Sort(r.service)
	slices.Sort(r.sendLag)
	return r, nil
}

// stallsOf groups the requests slower than over into stalls. A request
// not answered has no corrected latency (0), so it is in none.
func stallsOf(corr, lag []int64, due func(j int) time.Duration, over time.Duration) []stall {
	var out []stall
	var cur *stall
	for j := range corr {
		if time.Duration(corr[j]) <= over {
			continue
		}
		d := due(j)
		if cur == nil || d-(cur.due+cur.span) >= stallGap {
			out = append(out, stall{due: d})
			cur = &out[len(out)-1]
		}
		cur.span = d - cur.due
		cur.n++
		cur.worst = max(cur.worst, time.Duration(corr[j]))
		cur.worstLag = max(cur.worstLag, time.Duration(lag[j]))
	}
	return out
}

// quantile returns the exact q-quantile (nearest rank) of sorted ns samples, in ms.
func quantile(sorted []int64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	k := int(math.Ceil(q*float64(len(sorted)))) - 1
	k = max(0, min(k, len(sorted)-1))
	return float64(sorted[k]) / 1e6
}

// countOver counts the sorted ns samples longer than d.
func countOver(sorted []int64, d time.Duration) int {
	i, _ := slices.BinarySearch(sorted, int64(d)+1)
	return len(sorted) - i
}

func maxMS(sorted []int64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	return float64(sorted[len(sorted)-1]) / 1e6
}

func (r *result) achieved() float64 {
	if r.window <= 0 {
		return 0
	}
	return float64(r.ok+r.non2xx) / r.window.Seconds()
}

func (r *result) print(w *os.File, c config) {
	qs := []struct {
		name string
		q    float64
	}{{"p50", 0.50}, {"p99", 0.99}, {"p999", 0.999}, {"p9999", 0.9999}}

	var b strings.Builder
	fmt.Fprintf(&b, "LOADGEN label=%s url=%s rate=%g duration_s=%g conns=%d workers=%d",
		orDash(strings.ReplaceAll(c.label, " ", "_")), c.rawURL, c.rate, c.duration.Seconds(), c.conns, c.workers)
	fmt.Fprintf(&b, " scheduled=%d achieved_rps=%.1f ok=%d non2xx=%d errors=%d unsent=%d",
		r.scheduled, r.achieved(), r.ok, r.non2xx, r.errors, r.unsent)
	for _, q := range qs {
		fmt.Fprintf(&b, " c_%s_ms=%.3f", q.name, quantile(r.corrected, q.q))
	}
	fmt.Fprintf(&b, " c_max_ms=%.3f", maxMS(r.corrected))
	// Counts rather than quantiles add up over rounds: the share of all
	// rounds' requests over 5 ms is what a p99.9 target of 5 ms bounds.
	fmt.Fprintf(&b, " c_over_5ms=%d c_over_10ms=%d", countOver(r.corrected, 5*time.Millisecond), countOver(r.corrected, 10*time.Millisecond))
	for _, q := range qs {
		fmt.Fprintf(&b, " s_%s_ms=%.3f", q.name, quantile(r.service, q.q))
	}
	fmt.Fprintf(&b, " s_max_ms=%.3f", maxMS(r.service))
	fmt.Fprintf(&b, " lag_p50_ms=%.3f lag_p99_ms=%.3f responses_total=%d", quantile(r.sendLag, 0.5), quantile(r.sendLag, 0.99), r.responses)
	fmt.Fprintln(w, b.String())

	fmt.Fprintf(w, "%s: %.0f req/s offered, %.0f achieved over %.2fs; corrected p50/p99/p99.9/p99.99 = %.3f/%.3f/%.3f/%.3f ms; "+
		"service = %.3f/%.3f/%.3f/%.3f ms; %d errors, %d non-2xx, %d unsent; send lag p99 %.3f ms\n",
		orDash(c.label), c.rate, r.achieved(), r.window.Seconds(),
		quantile(r.corrected, .5), quantile(r.corrected, .99), quantile(r.corrected, .999), quantile(r.corrected, .9999),
		quantile(r.service, .5), quantile(r.service, .99), quantile(r.service, .999), quantile(r.service, .9999),
		r.errors, r.non2xx, r.unsent, quantile(r.sendLag, 0.99))
	if c.stalls > 0 {
		fmt.Fprintf(w, "%s: %d stalls over %v, the window starting at %.6f s of CLOCK_MONOTONIC (perf record -k mono) (due at ms: requests, span ms, worst ms, worst send lag ms):",
			orDash(c.label), len(r.stalls), c.stalls, r.windowMono.Seconds())
		for _, s := range r.stalls {
			fmt.Fprintf(w, " %.1f:%d,%.1f,%.1f,%.1f", ms(s.due), s.n, ms(s.span), ms(s.worst), ms(s.worstLag))
		}
		fmt.Fprintln(w)
	}
	if r.firstError != "" {
		fmt.Fprintf(w, "%s: first error: %s\n", orDash(c.label), r.firstError)
	}
}

// monotonicNow is CLOCK_MONOTONIC, the clock perf can stamp its samples
// with; Go's own monotonic readings have another origin.
func monotonicNow() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
