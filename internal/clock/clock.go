// Package clock gives the gateway a wall clock that never runs backwards.
//
// Replay protection trusts time: a signed request's timestamp must be
// within a window of "now", and its nonce is remembered for twice that
// window. If the host clock stepped back, requests already seen (and their
// nonces already forgotten) would fit the window again. Clock.Now holds
// still instead until the wall clock catches up, and reports the step.
package clock

import (
	"sync/atomic"
	"time"
)

// Clock is a non-decreasing wall clock. The zero value is not usable; use
// New. It is safe for concurrent use and allocation-free.
type Clock struct {
	wall func() time.Time
	last atomic.Int64 // unix ns of the latest time handed out
	// backSteps counts detected backward steps of more than StepTolerance.
	backSteps atomic.Uint64
	onStep    func(by time.Duration)
}

// StepTolerance is how far the wall clock may fall behind the latest time
// handed out before it counts as a backward step (small corrections and
// concurrent readers racing are not steps).
const StepTolerance = 100 * time.Millisecond

// New returns a clock reading wall (time.Now when nil). onStep, when not
// nil, is called once per detected backward step with its size; it must
// be quick (log and return).
func New(wall func() time.Time, onStep func(by time.Duration)) *Clock {
	if wall == nil {
		wall = time.Now
	}
	return &Clock{wall: wall, onStep: onStep}
}

// Now returns the later of the wall clock and the latest time it returned.
func (c *Clock) Now() time.Time {
	w := c.wall()
	wn := w.UnixNano()
	for {
		last := c.last.Load()
		if wn <= last {
			if behind := time.Duration(last - wn); behind > StepTolerance && c.stepped(last) {
				c.backSteps.Add(1)
				if c.onStep != nil {
					c.onStep(behind)
				}
			}
			return time.Unix(0, last)
		}
		if c.last.CompareAndSwap(last, wn) {
			return w
		}
	}
}

// stepped reports a step once per plateau: the first reader that finds the
// wall clock behind the plateau value marks it by nudging last by 1ns.
func (c *Clock) stepped(last int64) bool {
	return last%2 == 0 && c.last.CompareAndSwap(last, last+1)
}

// BackSteps reports how many backward steps were detected.
func (c *Clock) BackSteps() uint64 { return c.backSteps.Load() }
