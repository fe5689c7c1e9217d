package upstream

import (
	"testing"
	"time"

	"github.com/valyala/fasthttp"
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

// TestIdleLearnerFoundClosed: a close found when a connection is next
// taken is an upper bound of the backend's timeout, so a later, longer
// one does not lengthen what was learned; a shorter one shortens it. Each
// renews it; closes under the floor or at the ceiling teach nothing.
func TestIdleLearnerFoundClosed(t *testing.T) {
	var l idleLearner
	now := time.Unix(1_000_000, 0)
	ceiling := 60 * time.Second
	l.foundClosed(500*time.Millisecond, ceiling, now)
	l.foundClosed(ceiling, ceiling, now)
	if got := l.get(now); got != 0 {
		t.Fatalf("after closes under the floor and at the ceiling: %v learned, want none", got)
	}
	l.foundClosed(8*time.Second, ceiling, now)
	if got := l.get(now); got != 7200*time.Millisecond {
		t.Fatalf("found closed after 8 s: %v learned, want 7.2s", got)
	}
	l.foundClosed(20*time.Second, ceiling, now.Add(9*time.Minute))
	if got := l.get(now.Add(9 * time.Minute)); got != 7200*time.Millisecond {
		t.Fatalf("a later close found after 20 s: %v learned, want 7.2s kept", got)
	}
	if got := l.get(now.Add(18 * time.Minute)); got != 7200*time.Millisecond {
		t.Fatalf("the later close did not renew what was learned: %v at 18 min", got)
	}
	l.foundClosed(5*time.Second, ceiling, now.Add(18*time.Minute))
	if got := l.get(now.Add(18 * time.Minute)); got != 4500*time.Millisecond {
		t.Fatalf("found closed after 5 s: %v learned, want 4.5s", got)
	}
	if got := l.get(now.Add(29 * time.Minute)); got != 0 {
		t.Fatalf("10 minutes after the last close: %v learned, want none", got)
	}
}

// TestIdleKeepingLimit: of the timeout the last answer announced and the
// closes seen, the shorter holds, whichever came last; timeout=0 keeps no
// connection idle at all; an answer that announces nothing takes back what
// the one before announced.
func TestIdleKeepingLimit(t *testing.T) {
	var learned idleLearner
	k := idleKeeping{learned: &learned, ceiling: time.Minute}
	now := time.Unix(1_000_000, 0)
	if d, ok := k.limit(now); ok {
		t.Fatalf("nothing known: limit %v", d)
	}
	k.announce(5*time.Second, true)
	if d, ok := k.limit(now); !ok || d != 4500*time.Millisecond {
		t.Fatalf("timeout=5: %v %v, want 4.5s", d, ok)
	}
	learned.closed(3*time.Second, k.ceiling, now)
	k.announce(5*time.Second, true)
	if d, ok := k.limit(now); !ok || d != 2700*time.Millisecond {
		t.Fatalf("timeout=5 announced after a close seen at 3 s: %v %v, want 2.7s", d, ok)
	}
	if got := learned.get(now); got != 2700*time.Millisecond {
		t.Fatalf("an announcement changed what was learned from closes: %v", got)
	}
	k.announce(0, true)
	if d, ok := k.limit(now); !ok || d != 0 {
		t.Fatalf("timeout=0: %v %v, want 0 (no idle connection carries a request)", d, ok)
	}
	k.announce(0, false)
	if d, ok := k.limit(now); !ok || d != 2700*time.Millisecond {
		t.Fatalf("an answer announcing nothing: %v %v, want the 2.7s learned", d, ok)
	}
	if d, ok := k.limit(now.Add(learnedFor + time.Second)); ok {
		t.Fatalf("after the close lapsed, with nothing announced: limit %v", d)
	}
}

// TestIdleKeepingAnnounceAllocs: noting what an answer announces, on
// every answer fasthttp's client reads, allocates nothing.
func TestIdleKeepingAnnounceAllocs(t *testing.T) {
	var learned idleLearner
	k := idleKeeping{learned: &learned, ceiling: time.Minute}
	var h fasthttp.ResponseHeader
	h.Set("Keep-Alive", "timeout=5, max=100")
	if n := testing.AllocsPerRun(100, func() { k.announce(announcedKeepAlive(&h)) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
