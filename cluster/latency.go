package cluster

import (
	"sync/atomic"
	"time"
)

// LatencyBounds are the upper bounds of the Redis call latency buckets; a
// last bucket takes the rest.
var LatencyBounds = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond, time.Millisecond,
	2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, time.Second,
}

// latency counts call durations in LatencyBounds buckets, lock-free.
type latency struct {
	counts [len(LatencyBounds) + 1]atomic.Uint64
	sum    atomic.Int64
}

func (l *latency) observe(d time.Duration) {
	i := 0
	for i < len(LatencyBounds) && d > LatencyBounds[i] {
		i++
	}
	l.counts[i].Add(1)
	l.sum.Add(int64(d))
}

// Latency is a copy of a call-latency histogram: counts per bucket (the
// last is above every bound) and the sum of the durations.
type Latency struct {
	Counts [len(LatencyBounds) + 1]uint64
	Sum    time.Duration
}

func (l *latency) read() Latency {
	var s Latency
	for i := range l.counts {
		s.Counts[i] = l.counts[i].Load()
	}
	s.Sum = time.Duration(l.sum.Load())
	return s
}
