package anomaly

import "math"

// Signal names what a detector watches.
type Signal string

const (
	SignalRate    Signal = "rate"    // requests per second
	SignalErrors  Signal = "errors"  // share of 5xx answers
	SignalLatency Signal = "latency" // p99, milliseconds
)

// shape is what makes a departure of one signal: how many deviations,
// and how large a step from the usual figure (a factor of it, or points
// added to it).
type shape struct {
	rise   float64 // x must exceed mean*(1+rise) …
	points float64 // … or mean+points when points > 0
	least  float64 // and mean+least at the least
}

var shapes = map[Signal]shape{
	SignalRate:   {rise: 1},
	SignalErrors: {points: 0.05},
	// A latency of a millisecond or two that doubles is a busy host, not
	// a slow backend: a departure is 20 ms above the usual p99 at least.
	SignalLatency: {rise: 1, least: 20},
}

// detector follows one signal of one route.
type detector struct {
	signal    Signal
	mean, dev float64
	seen      int // intervals observed
	active    bool
	streak    int // intervals in a row past (or, while active, back within) the bound
}

// settings a detector reads.
type tuning struct {
	alpha       float64 // weight of a new figure (from the half-life)
	sensitivity float64 // deviations
	warm        int     // intervals before a departure counts
	confirm     int     // intervals in a row that raise an alert
	recover     int     // intervals in a row that end it
}

// event is what an observation changed: an alert raised or ended.
type event int

const (
	noEvent event = iota
	raised
	recovered
)

// observe takes the interval's figure x; judge false (too little
// traffic to tell) only learns from it, or goes on ending an alert.
func (d *detector) observe(x float64, t *tuning, judge bool) event {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return noEvent
	}
	d.seen++
	if d.seen == 1 {
		d.mean, d.dev = x, 0
		return noEvent
	}
	past := judge && d.past(x, t.sensitivity)
	switch {
	case !d.active && past && d.seen > t.warm:
		d.streak++
		if d.streak >= t.confirm {
			d.active, d.streak = true, 0
			return raised
		}
		return noEvent // a departure not yet confirmed leaves the mean alone
	case d.active:
		d.learn(x, t.alpha/8)
		if d.within(x, t.sensitivity) {
			d.streak++
			if d.streak >= t.recover {
				d.active, d.streak = false, 0
				return recovered
			}
		} else {
			d.streak = 0
		}
		return noEvent
	}
	d.streak = 0
	d.learn(x, t.alpha)
	return noEvent
}

func (d *detector) learn(x, alpha float64) {
	d.dev += alpha * (math.Abs(x-d.mean) - d.dev)
	d.mean += alpha * (x - d.mean)
}

// bound is the figure past which x departs.
func (d *detector) bound(k float64) float64 {
	s := shapes[d.signal]
	step := d.mean * (1 + s.rise)
	if s.points > 0 {
		step = d.mean + s.points
	}
	return math.Max(math.Max(step, d.mean+k*d.dev), d.mean+s.least)
}

func (d *detector) past(x, k float64) bool { return x > d.bound(k) }

// within reports x back under half the way to the bound.
func (d *detector) within(x, k float64) bool { return x <= d.mean+(d.bound(k)-d.mean)/2 }
