package clock

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestNeverRunsBackwards(t *testing.T) {
	base := time.Unix(1_764_400_000, 0)
	var wall atomic.Int64
	wall.Store(base.UnixNano())
	var steps []time.Duration
	c := New(func() time.Time { return time.Unix(0, wall.Load()) }, func(by time.Duration) { steps = append(steps, by) })

	if got := c.Now(); !got.Equal(base) {
		t.Fatalf("first read %v", got)
	}
	wall.Add(int64(time.Second))
	t1 := c.Now()
	// The host clock steps back an hour: time holds at t1.
	wall.Add(-int64(time.Hour))
	for range 3 {
		if got := c.Now(); got.Before(t1) {
			t.Fatalf("clock went back to %v from %v", got, t1)
		}
	}
	if len(steps) != 1 || steps[0] < 59*time.Minute || c.BackSteps() != 1 {
		t.Fatalf("steps %v (count %d), want one of about an hour", steps, c.BackSteps())
	}
	// Once the wall clock passes the plateau, it is followed again.
	wall.Add(int64(2 * time.Hour))
	if got := c.Now(); got.UnixNano() != wall.Load() {
		t.Fatalf("clock did not follow the wall after catching up: %v", got)
	}
}

func BenchmarkNow(b *testing.B) {
	c := New(nil, nil)
	b.ReportAllocs()
	for b.Loop() {
		_ = c.Now()
	}
}
