package pipeline

import "time"

// LoopLoad is implemented by an event loop that measures how far behind
// it runs: the gateway's overload signal (load shedding reads it).
type LoopLoad interface {
	// Lag is the loop's smoothed lag: how long a request that became
	// ready waits before the loop runs it.
	Lag() time.Duration
}

// LoopLag returns the lag of the loop c runs on; 0 off a loop or on a
// loop that does not measure it.
func (c *Ctx) LoopLag() time.Duration {
	if l, ok := c.Loop.(LoopLoad); ok {
		return l.Lag()
	}
	return 0
}
