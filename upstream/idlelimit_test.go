package upstream

import (
	"testing"
	"time"
)

// TestKeepBelow: a tenth of the backend's timeout is kept off it, and at
// least 250 ms; a timeout of 250 ms or less keeps nothing.
func TestKeepBelow(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{
		{5 * time.Second, 4500 * time.Millisecond},
		{2 * time.Second, 1750 * time.Millisecond},
		{time.Second, 750 * time.Millisecond},
		{75 * time.Second, 67500 * time.Millisecond},
		{250 * time.Millisecond, 0},
		{0, 0},
	} {
		if got := keepBelow(c.in); got != c.want {
			t.Errorf("keepBelow(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestIdleLearner: the last close seen sets the limit, whether shorter or
// longer than the one before; a close of a connection idle under a second
// (a restart's) teaches nothing; a close at or past the ceiling clears the
// limit; a limit lapses learnedFor after the last close that set it.
func TestIdleLearner(t *testing.T) {
	var l idleLearner
	t0 := time.Now()
	if d := l.get(t0); d != 0 {
		t.Fatalf("a new learner's limit is %v", d)
	}
	l.closed(5*time.Second, time.Minute, t0)
	if d := l.get(t0); d != 4500*time.Millisecond {
		t.Fatalf("after a close at 5 s: %v", d)
	}
	l.closed(300*time.Millisecond, time.Minute, t0)
	if d := l.get(t0); d != 4500*time.Millisecond {
		t.Fatalf("a close at 300 ms changed the limit to %v", d)
	}
	l.closed(2*time.Second, time.Minute, t0)
	if d := l.get(t0); d != 1750*time.Millisecond {
		t.Fatalf("after a close at 2 s: %v", d)
	}
	t1 := t0.Add(time.Minute)
	l.closed(10*time.Second, time.Minute, t1)
	if d := l.get(t1); d != 9*time.Second {
		t.Fatalf("after a later close at 10 s: %v", d)
	}
	if d := l.get(t1.Add(learnedFor - time.Second)); d != 9*time.Second {
		t.Fatalf("lapsed early: %v", d)
	}
	if d := l.get(t1.Add(learnedFor + time.Second)); d != 0 {
		t.Fatalf("still %v past learnedFor", d)
	}
	l.closed(5*time.Second, time.Minute, t1)
	l.closed(time.Minute, time.Minute, t1)
	if d := l.get(t1); d != 0 {
		t.Fatalf("a close at the ceiling left %v", d)
	}
}
