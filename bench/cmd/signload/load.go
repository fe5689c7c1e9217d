package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/bench/internal/openloop"
	"github.com/tollgate/tollgate/bench/internal/procstat"
	"github.com/tollgate/tollgate/bench/internal/signer"
	"github.com/tollgate/tollgate/sign"
	"github.com/valyala/fasthttp"
)

// run sends the signed load on its schedule, samples the gateway's RSS
// while it runs, replays the kept requests and reports; the exit code
// says whether every replay was refused.
func run(c *config) (int, error) {
	tgt, _, err := newTarget(c.rawURL, c.query, c)
	if err != nil {
		return 0, err
	}
	rtgt, _, err := newTarget(c.replayURL, c.query, c)
	if err != nil {
		return 0, err
	}
	if _, err := sign.Sign(c.secret, c.query, "", "0", "x"); err != nil {
		return 0, fmt.Errorf("-query cannot be signed: %w", err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	prefix := append(hex.AppendEncode(nil, rnd[:]), '-')

	l := newLoad(c, tgt, prefix)
	fmt.Printf("signload: %s rate=%g/s warmup=%v duration=%v conns=%d workers=%d requests=%d nonce prefix %s, replay to %s (1 in %d kept); t=0 is %s\n",
		tgt.uri, c.rate, c.warmup, c.duration, c.conns, c.workers, l.total, prefix, rtgt.uri, l.stride,
		l.t0.UTC().Format("15:04:05.000Z"))
	done := openloop.Go(c.workers, func() { tgt.worker(c, prefix, l.appKey, l.send) })
	w := l.watch(done)
	tgt.hc.CloseIdleConnections()
	rss := rssFigures(w.series, c.warmup)
	rp := replay(c, rtgt, l.keep, prefix, l.appKey)
	l.report(rtgt, w, rss, rp)
	return verdict(c, rp), nil
}

// load is the signed load's schedule and what it counts.
type load struct {
	c      *config
	tgt    *target
	total  int64
	sched  *openloop.Schedule
	t0     time.Time
	appKey []byte

	// Replay sample: request i is kept when i % stride == 0; its slot is
	// written by the one worker that sends it and read after every worker
	// is done.
	stride int64
	keep   []kept

	sent     atomic.Int64
	cnt      counts
	msgs     *messages
	late10ms atomic.Int64 // sent more than 10 ms after due
	maxLag   atomic.Int64 // ns
	errOnce  sync.Once
	firstErr string
}

func newLoad(c *config, tgt *target, prefix []byte) *load {
	_, total := openloop.Requests(c.rate, c.warmup, c.duration)
	l := &load{c: c, tgt: tgt, total: total, msgs: &messages{m: map[string]int64{}}, appKey: []byte(c.appKey)}
	if c.sample > 0 {
		l.stride = max(1, int64(math.Round(1/c.sample)))
		l.keep = make([]kept, (total+l.stride-1)/l.stride)
	}
	l.sched = openloop.NewSchedule(c.rate, total, c.grace, 0)
	l.t0 = l.sched.Start()
	return l
}

// send is one worker: it signs and sends the requests the schedule hands
// it until the schedule ends.
func (l *load) send(req *fasthttp.Request, resp *fasthttp.Response, s *signer.Signer) {
	for {
		i, due, now, ok := l.sched.Next()
		if !ok {
			return // the rest stays unsent
		}
		if lag := int64(now.Sub(due)); lag > int64(10*time.Millisecond) {
			l.late10ms.Add(1)
			openloop.StoreMax(&l.maxLag, lag)
		}
		ts := now.Unix()
		if err := s.Set(req, uint64(i), ts, nil); err != nil {
			l.errOnce.Do(func() { l.firstErr = err.Error() })
			l.cnt.errors.Add(1)
			continue
		}
		l.sent.Add(1)
		err := l.tgt.hc.DoTimeout(req, resp, l.c.timeout)
		accepted := false
		switch {
		case err != nil:
			l.cnt.errors.Add(1)
			l.errOnce.Do(func() { l.firstErr = err.Error() })
		case resp.StatusCode() >= 200 && resp.StatusCode() < 300:
			l.cnt.ok.Add(1)
			accepted = true
		case resp.StatusCode() == 401:
			l.cnt.s401.Add(1)
			l.msgs.add(resp.Body())
		default:
			l.cnt.other.Add(1)
		}
		if l.stride > 0 && i%l.stride == 0 {
			k := &l.keep[i/l.stride]
			k.index, k.ts, k.at, k.accepted = uint64(i), ts, now.Sub(l.t0), accepted
			copy(k.sig[:], s.Signature())
		}
	}
}

func (l *load) responses() int64 { return l.cnt.ok.Load() + l.cnt.s401.Load() + l.cnt.other.Load() }

// window is what the sampler saw: the RSS series and the responses
// counted at the edges of the measured window.
type window struct {
	series             []rssSample
	startSet, endSet   bool
	startResp, endResp int64
	startT, endT       time.Duration
}

// achieved is the responses per second over the measured window.
func (w *window) achieved() float64 {
	if d := w.endT - w.startT; w.startSet && d > 0 {
		return float64(w.endResp-w.startResp) / d.Seconds()
	}
	return 0
}

// watch prints one line a second until the workers are done. The
// response counter is also read at the edges of the measured window (the
// first tick at or after the end of the warm-up and of the schedule).
func (l *load) watch(done <-chan struct{}) *window {
	c := l.c
	w := &window{}
	var (
		gatewayGone         bool
		prevResp            int64
		warmEdge, schedEdge = c.warmup, c.warmup + c.duration
	)
	sample := func(now time.Time, last bool) {
		el := now.Sub(l.t0)
		r := l.responses()
		if !w.startSet && el >= warmEdge {
			w.startSet, w.startResp, w.startT = true, r, el
		}
		if w.startSet && !w.endSet && el >= schedEdge {
			w.endSet, w.endResp, w.endT = true, r, el
		}
		kib := int64(-1)
		if c.pid > 0 {
			if kib = procstat.RSSKiB(c.pid); kib < 0 && !gatewayGone {
				gatewayGone = true
				fmt.Printf("signload: cannot read /proc/%d/status: the gateway is gone?\n", c.pid)
			}
		}
		t := el.Round(time.Second)
		w.series = append(w.series, rssSample{t: t, kib: kib})
		end := ""
		if last {
			end = " (end)"
		}
		fmt.Printf("t=%ds rss=%s MiB sent=%d resp/s=%d ok=%d 401=%d other=%d errors=%d%s\n",
			int(t.Seconds()), mib(kib), l.sent.Load(), r-prevResp, l.cnt.ok.Load(), l.cnt.s401.Load(), l.cnt.other.Load(), l.cnt.errors.Load(), end)
		prevResp = r
	}
	time.Sleep(time.Until(l.t0))
	tick := time.NewTicker(time.Second)
	sample(time.Now(), false)
loop:
	for {
		select {
		case now := <-tick.C:
			sample(now, false)
		case <-done:
			break loop
		}
	}
	tick.Stop()
	sample(time.Now(), true)
	if !w.endSet { // every response came in before the schedule's end
		w.endResp, w.endT = l.responses(), time.Since(l.t0)
	}
	return w
}

// rss is the gateway's RSS over the run: the value at the end of the
// warm-up (the first sample at or after it), then min and max after it.
// The growth in the second half of the time after warm-up (its max minus
// the max of the first half) tells a plateau from a steady climb: a Go
// heap grows until the collector's goal before it levels off.
type rss struct {
	warmKiB, minKiB, maxKiB, endKiB  int64
	growthMiB, growthPct, growth2MiB float64
}

func rssFigures(series []rssSample, warmEdge time.Duration) rss {
	var warmKiB, minKiB, maxKiB, endKiB, max1KiB, max2KiB int64 = -1, -1, -1, -1, -1, -1
	mid := warmEdge + (series[len(series)-1].t-warmEdge)/2
	for _, s := range series {
		if s.kib < 0 {
			continue
		}
		switch {
		case s.t < warmEdge:
			continue
		case warmKiB < 0:
			warmKiB, minKiB, maxKiB = s.kib, s.kib, s.kib
		default:
			minKiB, maxKiB = min(minKiB, s.kib), max(maxKiB, s.kib)
		}
		if s.t <= mid {
			max1KiB = max(max1KiB, s.kib)
		} else {
			max2KiB = max(max2KiB, s.kib)
		}
		endKiB = s.kib
	}
	r := rss{warmKiB: warmKiB, minKiB: minKiB, maxKiB: maxKiB, endKiB: endKiB,
		growthMiB: math.NaN(), growthPct: math.NaN(), growth2MiB: math.NaN()}
	if warmKiB > 0 {
		r.growthMiB = float64(maxKiB-warmKiB) / 1024
		r.growthPct = 100 * float64(maxKiB-warmKiB) / float64(warmKiB)
	}
	if max1KiB > 0 && max2KiB > 0 {
		r.growth2MiB = float64(max2KiB-max1KiB) / 1024
	}
	return r
}

// report prints the SIGNLOAD line and its reading.
func (l *load) report(rtgt *target, w *window, m rss, rp replayResult) {
	c, cnt := l.c, &l.cnt
	achieved, win := w.achieved(), w.endT-w.startT
	unsent := l.total - l.sent.Load()
	fmt.Printf("SIGNLOAD url=%s replay_url=%s rate=%g duration_s=%g warmup_s=%g conns=%d workers=%d"+
		" scheduled=%d sent=%d unsent=%d achieved_rps=%.0f window_s=%.1f ok=%d s401=%d s401_replayed=%d other=%d errors=%d"+
		" late_10ms=%d max_lag_ms=%.1f"+
		" rss_warm_mib=%s rss_min_mib=%s rss_max_mib=%s rss_end_mib=%s rss_growth_mib=%.1f rss_growth_pct=%.1f rss_growth_2nd_half_mib=%.1f"+
		" replays_total=%d replays_refused=%d replays_accepted=%d replays_other=%d replays_errors=%d replays_unsent=%d\n",
		l.tgt.uri, rtgt.uri, c.rate, c.duration.Seconds(), c.warmup.Seconds(), c.conns, c.workers,
		l.total, l.sent.Load(), unsent, achieved, win.Seconds(), cnt.ok.Load(), cnt.s401.Load(), l.msgs.get(replayedMsg), cnt.other.Load(), cnt.errors.Load(),
		l.late10ms.Load(), float64(l.maxLag.Load())/1e6,
		mib(m.warmKiB), mib(m.minKiB), mib(m.maxKiB), mib(m.endKiB), m.growthMiB, m.growthPct, m.growth2MiB,
		rp.total, rp.refused, rp.accepted, rp.other, rp.errors, rp.unsent)

	below := ""
	if achieved < 0.98*c.rate {
		below = fmt.Sprintf(" (BELOW the %g/s asked: %.0f%%)", c.rate, 100*achieved/c.rate)
	}
	fmt.Printf("signload: %.0f signed req/s achieved over the %.1fs after warm-up%s; %d sent, %d unsent; %d 2xx, %d 401, %d other, %d errors; %d sent >10ms late (max %.1f ms)\n",
		achieved, win.Seconds(), below, l.sent.Load(), unsent, cnt.ok.Load(), cnt.s401.Load(), cnt.other.Load(), cnt.errors.Load(), l.late10ms.Load(), float64(l.maxLag.Load())/1e6)
	fmt.Printf("signload: 401 messages during the load: %s\n", l.msgs)
	if c.pid > 0 {
		fmt.Printf("signload: gateway pid %d RSS: %s MiB at the end of warm-up, then min %s / max %s / end %s MiB; growth after warm-up %+.1f MiB (%+.1f%%), of which %+.1f MiB in its second half\n",
			c.pid, mib(m.warmKiB), mib(m.minKiB), mib(m.maxKiB), mib(m.endKiB), m.growthMiB, m.growthPct, m.growth2MiB)
	}
	if l.firstErr != "" {
		fmt.Printf("signload: first error: %s\n", l.firstErr)
	}
	fmt.Printf("signload: replays to %s: %d of %d refused as %q; %d accepted, %d other answers (%s), %d errors, %d not sent (replay phase %.1fs)\n",
		rtgt.uri, rp.refused, rp.total, replayedMsg, rp.accepted, rp.other, rp.msgs, rp.errors, rp.unsent, rp.took.Seconds())
	if rp.firstErr != "" {
		fmt.Printf("signload: first replay error: %s\n", rp.firstErr)
	}
	if len(rp.acceptedAt) > 0 {
		fmt.Printf("signload: accepted replays by the second their original was sent: %s\n", perSecond(rp.acceptedAt))
	}
}

// verdict is the exit code: 1 when a replay was accepted, 3 when replay
// protection could not be checked in full.
func verdict(c *config, rp replayResult) int {
	switch {
	case c.sample > 0 && rp.total == 0:
		fmt.Println("signload: FAIL: no accepted request was kept, so replay protection was not checked")
		return 3
	case rp.accepted > 0:
		fmt.Printf("signload: FAIL: %d replays were accepted\n", rp.accepted)
		return 1
	case rp.refused != rp.total:
		fmt.Printf("signload: FAIL: %d replays got no %q answer\n", rp.total-rp.refused, replayedMsg)
		return 3
	}
	return 0
}
