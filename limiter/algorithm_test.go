package limiter

import (
	"testing"
	"time"
)

const (
	ms = int64(time.Millisecond)
	s1 = int64(time.Second)
)

// t0 is a window-aligned instant (whole seconds since the epoch).
var t0 = int64(1_800_000_000) * s1

// admits counts how many of n requests at now l admits.
func admits(l *Limit, st *State, now int64, n int) int {
	k := 0
	for range n {
		if l.Take(st, now).OK {
			k++
		}
	}
	return k
}

func TestTokenBucketBurstAndRefill(t *testing.T) {
	l := NewLimit(TokenBucket, 10, time.Second, 15, 0)
	var st State
	for i := range 15 {
		d := l.Take(&st, t0)
		if !d.OK || d.Remaining != int64(14-i) {
			t.Fatalf("request %d: %+v, want admitted with %d remaining", i, d, 14-i)
		}
	}
	d := l.Take(&st, t0)
	if d.OK || d.RetryAfter != 100*ms {
		t.Fatalf("16th at once: %+v, want refused, retry after exactly 100ms", d)
	}
	if d := l.Take(&st, t0+100*ms-1); d.OK || d.RetryAfter != 1 {
		t.Fatalf("1ns before the next token: %+v", d)
	}
	if d := l.Take(&st, t0+100*ms); !d.OK || d.Remaining != 0 {
		t.Fatalf("at the next token: %+v", d)
	}
	// A full refill takes 1.5s; then the whole burst again.
	if got := admits(&l, &st, t0+100*ms+1500*ms, 20); got != 15 {
		t.Fatalf("after a full refill: %d admitted, want 15", got)
	}
	// Sustained: 10 per second exactly, over 10 s of one request per ms.
	st = State{}
	n := 0
	for now := t0; now < t0+10*s1; now += ms {
		if l.Take(&st, now).OK {
			n++
		}
	}
	if n != 15+100-1 && n != 15+100 { // burst + rate × 10s (the last token lands on the boundary)
		t.Fatalf("10 s at 1000/s offered: %d admitted, want 114 or 115", n)
	}
}

func TestDefaultBurstIsOneAndAHalfRates(t *testing.T) {
	s, err := (&Config{By: "ip", Rate: 10}).validate()
	if err != nil {
		t.Fatal(err)
	}
	var st State
	if got := admits(&s.base, &st, t0, 100); got != 15 {
		t.Fatalf("default burst admitted %d at once, want 15", got)
	}
	s, _ = (&Config{By: "ip", Rate: 5}).validate() // 7.5: seven now, the half token later
	st = State{}
	if got := admits(&s.base, &st, t0, 100); got != 7 {
		t.Fatalf("burst 7.5 admitted %d at once, want 7", got)
	}
	if d := s.base.Take(&st, t0+100*ms); !d.OK {
		t.Fatalf("the half token plus 100ms of refill (0.5 + 0.5) must admit one: %+v", d)
	}
}

func TestFixedWindowEdges(t *testing.T) {
	l := NewLimit(FixedWindow, 5, time.Second, 0, 0)
	var st State
	end := t0 + s1 - 1 // the window's last nanosecond
	if got := admits(&l, &st, t0+999*ms, 5); got != 5 {
		t.Fatalf("window fill: %d", got)
	}
	if d := l.Take(&st, end); d.OK || d.RetryAfter != 1 || d.Reset != 1 {
		t.Fatalf("6th in the window: %+v, want refused until the next window (1ns)", d)
	}
	// A fixed window admits up to 2 × rate across its edge: that is the
	// algorithm (sliding_window exists to avoid it).
	if got := admits(&l, &st, t0+s1, 10); got != 5 {
		t.Fatalf("next window: %d admitted, want 5", got)
	}
	if d := l.Take(&st, t0+s1+500*ms); d.OK || d.RetryAfter != 500*ms {
		t.Fatalf("mid second window: %+v", d)
	}
}

func TestSlidingWindowWeighsThePreviousWindow(t *testing.T) {
	l := NewLimit(SlidingWindow, 10, time.Second, 0, 0)
	var st State
	if got := admits(&l, &st, t0, 10); got != 10 {
		t.Fatalf("fill: %d", got)
	}
	// At the next window's start the whole previous window still counts.
	d := l.Take(&st, t0+s1)
	if d.OK || d.RetryAfter != 100*ms {
		t.Fatalf("at the edge: %+v, want refused with retry 100ms (10×0.9 + 1 <= 10)", d)
	}
	if d := l.Take(&st, t0+s1+100*ms-1); d.OK {
		t.Fatalf("just before: %+v", d)
	}
	if d := l.Take(&st, t0+s1+100*ms); !d.OK || d.Remaining != 0 {
		t.Fatalf("at 100ms: %+v, want admitted (estimate 9)", d)
	}
	// Half way: 10×0.5 + 1 = 6 counted, room for 4 more.
	if got := admits(&l, &st, t0+s1+500*ms, 10); got != 4 {
		t.Fatalf("half way: %d admitted, want 4", got)
	}
	// Two windows later everything is forgotten.
	if got := admits(&l, &st, t0+3*s1, 20); got != 10 {
		t.Fatalf("after two idle windows: %d", got)
	}
	// When the current window alone is full, the wait reaches into the
	// next window: previous = 10 there, so at 100ms into it.
	st = State{}
	admits(&l, &st, t0+900*ms, 10)
	if d := l.Take(&st, t0+900*ms); d.OK || d.RetryAfter != 100*ms+100*ms {
		t.Fatalf("full current window: %+v, want retry 200ms", d)
	}
}

func TestLeakyBucketDelaysThenRefuses(t *testing.T) {
	l := NewLimit(LeakyBucket, 10, time.Second, 0, 300*time.Millisecond)
	var st State
	for i, want := range []int64{0, 100 * ms, 200 * ms, 300 * ms} {
		d := l.Take(&st, t0)
		if !d.OK || d.Delay != want {
			t.Fatalf("request %d: %+v, want delay %v", i, d, time.Duration(want))
		}
	}
	if d := l.Take(&st, t0); d.OK || d.RetryAfter != 100*ms {
		t.Fatalf("5th: %+v, want refused (its slot is 400ms away, 100ms past max_delay)", d)
	}
	// Constant rate: spaced requests are not delayed at all.
	st = State{}
	for i := range 20 {
		if d := l.Take(&st, t0+int64(i)*100*ms); !d.OK || d.Delay != 0 {
			t.Fatalf("paced request %d: %+v", i, d)
		}
	}
}

func TestSplitDividesTheRate(t *testing.T) {
	l := NewLimit(TokenBucket, 10, time.Second, 15, 0)
	s := l.Split(2)
	var st State
	if got := admits(&s, &st, t0, 100); got != 7 { // 7.5 tokens
		t.Fatalf("node burst: %d, want 7", got)
	}
	n := 0
	for now := t0 + s1; now < t0+11*s1; now += ms {
		if s.Take(&st, now).OK {
			n++
		}
	}
	// 5.5 tokens refilled during the first second, then 5 per second.
	if n < 54 || n > 55 {
		t.Fatalf("a node of two admitted %d in the next 10 s, want 5 + 50", n)
	}
	// A node's share never drops below one token / one admission.
	tiny := NewLimit(TokenBucket, 2, time.Second, 3, 0).Split(10)
	st = State{}
	if !tiny.Take(&st, t0).OK {
		t.Fatal("split below one token admits nothing")
	}
	w := NewLimit(FixedWindow, 10, time.Second, 0, 0).Split(3)
	st = State{}
	if got := admits(&w, &st, t0, 10); got != 3 {
		t.Fatalf("window of 10 over 3 nodes: %d per node, want 3", got)
	}
}

func TestGiveChargeUsedIdle(t *testing.T) {
	for _, alg := range []Algorithm{TokenBucket, FixedWindow, SlidingWindow, LeakyBucket} {
		t.Run(alg.String(), func(t *testing.T) {
			l := NewLimit(alg, 10, time.Second, 10, 0)
			if alg == LeakyBucket {
				l = NewLimit(alg, 10, time.Second, 0, 900*time.Millisecond)
			}
			var st State
			if !l.Idle(&st, t0) {
				t.Fatal("a zero state is not idle")
			}
			admits(&l, &st, t0, 10)
			if l.Idle(&st, t0) {
				t.Fatal("a full counter is idle")
			}
			if l.Take(&st, t0).OK {
				t.Fatal("11th admitted")
			}
			l.Give(&st, t0)
			if !l.Take(&st, t0).OK {
				t.Fatal("a given back admission is not available again")
			}
			if u := l.Used(&st, t0); u != 10 {
				t.Fatalf("used %d, want 10", u)
			}
			var ch State
			l.Charge(&ch, 4, t0)
			if u := l.Used(&ch, t0); u != 4 {
				t.Fatalf("charged 4, used %d", u)
			}
			l.Charge(&ch, 1000, t0) // saturates: never beyond empty
			if got := admits(&l, &ch, t0, 5); got != 0 {
				t.Fatalf("a saturated counter admitted %d", got)
			}
			if u := l.Used(&ch, t0); u > 10 {
				t.Fatalf("saturated counter used %d > capacity", u)
			}
			if !l.Idle(&ch, t0+5*s1) {
				t.Fatal("not idle 5 s later")
			}
		})
	}
}

func TestPeekMatchesTake(t *testing.T) {
	for _, alg := range []Algorithm{TokenBucket, FixedWindow, SlidingWindow} {
		l := NewLimit(alg, 10, time.Second, 10, 0)
		var st State
		for i := range 12 {
			now := t0 + int64(i)*37*ms
			rem, _ := l.Peek(&st, now)
			d := l.Take(&st, now)
			if d.OK != (rem > 0) || (d.OK && d.Remaining != rem-1) {
				t.Fatalf("%v request %d: peek %d, take %+v", alg, i, rem, d)
			}
		}
	}
}
