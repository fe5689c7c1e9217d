package history

import (
	"context"
	"time"
)

// Sink takes a minute's counts: the Local store, Redis.
type Sink interface {
	AddMinute(minute time.Time, counts map[string]uint64)
}

// Recorder turns running totals into counts per minute.
type Recorder struct {
	// Totals returns every route's requests since the start (the
	// metrics' counters); a total that went down (a route's series made
	// anew by a reload) counts from zero.
	Totals func() map[string]uint64
	Sinks  []Sink
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	last map[string]uint64
}

// Run records a minute at each minute's turn until ctx ends. The first
// turn only reads the totals: the minute before it was not watched whole.
func (r *Recorder) Run(ctx context.Context) {
	now := r.now()
	r.last = r.Totals()
	for {
		next := now.Truncate(time.Minute).Add(time.Minute)
		t := time.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		now = r.now()
		r.Tick(next.Add(-time.Minute))
	}
}

// Tick reads the totals and gives the sinks what each route took since
// the last reading, as the minute that began at minute.
func (r *Recorder) Tick(minute time.Time) {
	cur := r.Totals()
	counts := make(map[string]uint64, len(cur))
	for route, n := range cur {
		prev, seen := r.last[route]
		switch {
		case !seen && r.last == nil:
			continue // the first reading: no minute to count yet
		case n >= prev:
			n -= prev
		}
		if n > 0 {
			counts[route] = n
		}
	}
	r.last = cur
	if len(counts) == 0 {
		return
	}
	for _, s := range r.Sinks {
		s.AddMinute(minute, counts)
	}
}

func (r *Recorder) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
