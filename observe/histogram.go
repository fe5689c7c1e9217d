package observe

import (
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/internal/stripe"
)

// LatencyBounds are the upper bounds of every latency histogram's buckets:
// sub-millisecond steps at the bottom so p50 … p99.9 of a fast gateway are
// derivable, up to 10 s for timeouts. A last bucket (+Inf) takes the rest.
var LatencyBounds = [...]time.Duration{
	50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// NumBuckets is the number of buckets of a Histogram, +Inf included.
const NumBuckets = len(LatencyBounds) + 1

// Histogram counts durations in LatencyBounds buckets. Observe is two
// atomic adds in the stripe of the request's loop and takes no lock, so
// requests of one route on every loop share it without waiting for each
// other or moving a cache line between them; the zero value is ready.
type Histogram struct {
	_     stripe.Pad // off the line of the fields before it
	cells [stripe.N]histogramCell
}

type histogramCell struct {
	counts [NumBuckets]atomic.Uint64
	sum    atomic.Int64 // nanoseconds
	_      stripe.Pad
}

// Observe counts one duration in stripe st (pipeline.Ctx.Stripe).
func (h *Histogram) Observe(st int, d time.Duration) {
	i := 0
	for i < len(LatencyBounds) && d > LatencyBounds[i] {
		i++
	}
	c := &h.cells[st&(stripe.N-1)]
	c.counts[i].Add(1)
	c.sum.Add(int64(d))
}

// Read sums the stripes. Counts are per bucket (not cumulative); they are
// read one by one while requests go on, so Count and Sum may disagree by
// the requests that finished meanwhile.
func (h *Histogram) Read() HistogramSnapshot {
	var s HistogramSnapshot
	for i := range h.cells {
		c := &h.cells[i]
		for j := range c.counts {
			s.Counts[j] += c.counts[j].Load()
		}
		s.Sum += time.Duration(c.sum.Load())
	}
	return s
}

// HistogramSnapshot is a copy of a Histogram.
type HistogramSnapshot struct {
	Counts [NumBuckets]uint64 // per bucket, the last is +Inf
	Sum    time.Duration
}

// Count is the number of durations counted.
func (s *HistogramSnapshot) Count() uint64 {
	var n uint64
	for _, c := range s.Counts {
		n += c
	}
	return n
}

// Sub returns what s counted since prev (an earlier copy of the same
// histogram).
func (s *HistogramSnapshot) Sub(prev *HistogramSnapshot) HistogramSnapshot {
	var d HistogramSnapshot
	for i := range s.Counts {
		if s.Counts[i] >= prev.Counts[i] {
			d.Counts[i] = s.Counts[i] - prev.Counts[i]
		}
	}
	d.Sum = s.Sum - prev.Sum
	return d
}

// Quantile estimates the q-quantile (0 < q ≤ 1) the way Prometheus'
// histogram_quantile does: linear within the bucket it falls in; in the
// +Inf bucket it answers the highest bound. It is 0 when nothing was
// counted.
func (s *HistogramSnapshot) Quantile(q float64) time.Duration {
	n := s.Count()
	if n == 0 {
		return 0
	}
	rank := q * float64(n)
	var below uint64
	for i, c := range s.Counts {
		if c == 0 || float64(below+c) < rank {
			below += c
			continue
		}
		if i == len(LatencyBounds) {
			return LatencyBounds[len(LatencyBounds)-1]
		}
		lo := time.Duration(0)
		if i > 0 {
			lo = LatencyBounds[i-1]
		}
		frac := (rank - float64(below)) / float64(c)
		return lo + time.Duration(frac*float64(LatencyBounds[i]-lo))
	}
	return LatencyBounds[len(LatencyBounds)-1]
}
