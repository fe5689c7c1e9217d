package adaptive

import (
	"math"
	"sync/atomic"
	"time"
)

// Estimator constants (see the package documentation).
const (
	// windowSamples completions make one window; its mean is one rtt.
	windowSamples = 20
	// probeEvery is how often rtt₀ is measured again, ± a quarter.
	probeEvery = 10 * time.Second
	// probeTimeout bounds a probe that gets no window.
	probeTimeout = time.Second
	// dropFactor cuts the limit after a window with upstream failures.
	dropFactor = 0.9
	// countShift packs a window's sample count above its latency sum.
	countShift = 48
	sumMask    = 1<<countShift - 1
	// maxSampleMicros bounds one sample, so that the sum cannot overflow.
	maxSampleMicros = 1 << 30
)

// Probe phases.
const (
	phaseSteady int32 = iota
	phaseProbing
)

// estimator turns completions into a limit. record runs on the request
// path; the completion that fills a window runs update, alone.
type estimator struct {
	adaptive bool
	min, max float64

	// window is count<<countShift | sum of latencies (µs).
	window atomic.Uint64
	drops  atomic.Uint32
	peak   atomic.Int64 // the most in flight seen in the window
	busy   atomic.Bool  // an update runs

	// Published for admission and reports.
	limit   atomic.Int64
	phase   atomic.Int32
	epoch   atomic.Uint32 // admissions since the last probe began carry it
	rttZero atomic.Int64  // ns; 0 until measured
	rttNow  atomic.Int64  // ns: the last window's mean
	probes  atomic.Uint64

	// Owned by update (busy held).
	estimate     float64
	nextProbe    int64 // unix ns
	probeStarted int64
	probeEvery   time.Duration
	seed         uint64
}

func newEstimator(s *Settings, now time.Time) *estimator {
	e := &estimator{adaptive: s.adaptive(), min: float64(s.Min), max: float64(s.Max), probeEvery: probeEvery,
		seed: uint64(now.UnixNano()) | 1}
	if !e.adaptive {
		e.limit.Store(int64(s.fixed))
		return e
	}
	e.estimate = e.min
	e.startProbe(now.UnixNano())
	return e
}

// record adds one completion (admitted in epoch, inFlight in flight as it
// ended) and reports whether it filled a window.
func (e *estimator) record(epoch uint32, latency time.Duration, failed bool, inFlight int64, now int64) {
	if e.phase.Load() == phaseProbing {
		if epoch != e.epoch.Load() {
			// Admitted before the probe: its latency includes the queue
			// the probe waits to drain.
			e.abandonLateProbe(now)
			return
		}
	}
	if failed {
		e.drops.Add(1)
	}
	if p := e.peak.Load(); inFlight > p {
		e.peak.CompareAndSwap(p, inFlight) // a lost race loses a peak by one request
	}
	us := uint64(max(latency.Microseconds(), 1))
	if us > maxSampleMicros {
		us = maxSampleMicros
	}
	w := e.window.Add(1<<countShift | us)
	if w>>countShift == windowSamples {
		e.update(now)
	}
}

// abandonLateProbe ends a probe that got no window in probeTimeout.
func (e *estimator) abandonLateProbe(now int64) {
	if !e.busy.CompareAndSwap(false, true) {
		return
	}
	defer e.busy.Store(false)
	if e.phase.Load() == phaseProbing && now-e.probeStarted > int64(probeTimeout) {
		e.endProbe(now)
	}
}

// update closes the window and moves the limit.
func (e *estimator) update(now int64) {
	if !e.busy.CompareAndSwap(false, true) {
		return // one runs already; this window's samples go into the next
	}
	defer e.busy.Store(false)
	w := e.window.Swap(0)
	drops := e.drops.Swap(0)
	peak := e.peak.Swap(0)
	n := w >> countShift
	if n == 0 {
		return
	}
	rtt := int64(w&sumMask) / int64(n) * int64(time.Microsecond)
	e.rttNow.Store(rtt)
	if !e.adaptive {
		return
	}
	if e.phase.Load() == phaseProbing {
		e.rttZero.Store(rtt)
		e.endProbe(now)
		return
	}
	if z := e.rttZero.Load(); z == 0 || rtt < z {
		e.rttZero.Store(rtt)
	}
	e.estimate = e.next(e.estimate, float64(e.rttZero.Load()), float64(rtt), drops > 0, float64(peak))
	e.publish()
	if now >= e.nextProbe {
		e.startProbe(now)
	}
}

// next is Vegas's step from limit, given the no-load and current latency.
func (e *estimator) next(limit, rttZero, rtt float64, dropped bool, peak float64) float64 {
	step := max(1, math.Log10(limit))
	switch queue := limit * (1 - rttZero/rtt); {
	case dropped:
		limit *= dropFactor
	case queue > 6*step:
		limit -= step
	case 2*peak < limit:
		// The traffic did not use half the limit: its latency says
		// nothing of what more would do.
	case queue <= step:
		limit += 6 * step
	case queue < 3*step:
		limit += step
	}
	return min(max(limit, e.min), e.max)
}

func (e *estimator) publish() { e.limit.Store(int64(e.estimate)) }

// startProbe drops the limit to min until the requests admitted before
// have finished and a window was measured at that concurrency.
func (e *estimator) startProbe(now int64) {
	e.probeStarted = now
	e.epoch.Add(1)
	e.window.Store(0)
	e.phase.Store(phaseProbing)
	e.limit.Store(int64(e.min))
	e.probes.Add(1)
}

// endProbe restores the limit and schedules the next probe.
func (e *estimator) endProbe(now int64) {
	e.phase.Store(phaseSteady)
	e.publish()
	e.seed = e.seed*6364136223846793005 + 1442695040888963407
	jitter := float64(e.seed>>11)/float64(1<<53)*0.5 - 0.25 // ±¼
	e.nextProbe = now + int64(float64(e.probeEvery)*(1+jitter))
}
