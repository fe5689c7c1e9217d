package adaptive

import "math"

// Anomaly detection: each route's request rate, error rate and latency,
// sampled once a second, against a baseline learned online. The baseline
// is an exponentially weighted mean with a time constant of baseLife
// samples, and its spread an exponentially weighted mean absolute
// deviation (robust: one wild second moves it by a six-hundredth). A
// sample further than threshold spreads from the mean is outside; raise
// samples outside in a row raise an alert, and recover samples inside in
// a row clear it. While a signal is outside, the baseline does not learn
// from it (a spike must not become the normal it is judged by); a shift
// that lasts adoptAfter samples is taken as the new normal. A slow
// drift such as the day's rise and fall moves the mean along with it.
const (
	baseLife   = 600  // samples (10 min at one a second)
	warmup     = 300  // samples before a baseline judges
	raiseAfter = 3    // samples outside in a row
	recoverAt  = 10   // samples inside in a row
	adoptAfter = 1800 // samples outside in a row: a new normal
	// madToSigma scales a mean absolute deviation to a standard
	// deviation's size for a normal distribution.
	madToSigma = 1.25
)

// baseline is one signal's learned normal and its alert state.
type baseline struct {
	mean, dev float64
	n         int
	outside   int // in a row
	inside    int // in a row, while alerting
	alerting  bool
	floor     float64 // the least spread judged by, in the signal's unit
	last      float64 // the last sample judged
}

// alertEvent is what observing one sample changed.
type alertEvent int8

const (
	noEvent alertEvent = iota
	raised
	recovered
)

// observe judges x against the baseline, learns from it when it is
// normal, and reports a raised or recovered alert.
func (b *baseline) observe(x, threshold float64) alertEvent {
	b.last = x
	if b.n < warmup {
		b.learn(x)
		return noEvent
	}
	spread := math.Max(madToSigma*b.dev, b.floor)
	out := math.Abs(x-b.mean) > threshold*spread
	if !b.alerting {
		if !out {
			b.outside = 0
			b.learn(x)
			return noEvent
		}
		b.outside++
		if b.outside >= raiseAfter {
			b.alerting, b.inside = true, 0
			return raised
		}
		return noEvent
	}
	if out {
		b.inside = 0
		b.outside++
		if b.outside >= adoptAfter {
			// Outside for half an hour: the new level is the normal now.
			b.mean, b.alerting, b.outside = x, false, 0
			return recovered
		}
		return noEvent
	}
	b.inside++
	if b.inside >= recoverAt {
		b.alerting, b.outside = false, 0
		return recovered
	}
	return noEvent
}

func (b *baseline) learn(x float64) {
	b.n++
	if b.n == 1 {
		b.mean = x
		return
	}
	w := 1.0 / baseLife
	if b.n < baseLife {
		w = 1 / float64(b.n) // a plain mean until the window is full
	}
	b.dev += w * (math.Abs(x-b.mean) - b.dev)
	b.mean += w * (x - b.mean)
}
