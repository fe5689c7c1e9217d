package breaker

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/stripe"
	"github.com/tollgate/tollgate/internal/testutil"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }
func newTest(cfg Config) (*Breaker, *clock) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	return New(cfg, c.now), c
}

// outcomes admits n requests and reports them, fails of them failed.
func outcomes(t *testing.T, b *Breaker, n, fails int) {
	t.Helper()
	for i := range n {
		gen, ok := b.Allow()
		if !ok {
			t.Fatalf("request %d refused in state %v", i, b.State())
		}
		b.Done(0, gen, i >= fails)
	}
}

func TestNoTripUnderMinRequests(t *testing.T) {
	b, _ := newTest(Config{MinRequests: 100})
	outcomes(t, b, 99, 99) // all failed, but fewer than 100
	if b.State() != Closed {
		t.Fatal("tripped under min_requests")
	}
}

func TestTripsAboveTheRate(t *testing.T) {
	b, _ := newTest(Config{MinRequests: 100, FailureRate: 0.5})
	outcomes(t, b, 100, 50) // exactly 50 %: not above
	if b.State() != Closed {
		t.Fatal("tripped at exactly the rate")
	}
	gen, _ := b.Allow()
	b.Done(0, gen, false) // 51 of 101
	if b.State() != Open {
		t.Fatalf("state %v after 51 failures in 101", b.State())
	}
	if _, ok := b.Allow(); ok {
		t.Fatal("an open breaker let a request through")
	}
}

func TestWindowSlides(t *testing.T) {
	b, c := newTest(Config{Window: 10 * time.Second, Buckets: 10, MinRequests: 10})
	outcomes(t, b, 10, 5)   // 50 %: closed
	c.add(11 * time.Second) // all of it slid out
	outcomes(t, b, 9, 9)    // 9 failures alone: under min_requests
	if b.State() != Closed {
		t.Fatal("old outcomes still counted")
	}
	gen, _ := b.Allow()
	b.Done(0, gen, false) // 10 of 10 failed
	if b.State() != Open {
		t.Fatal("did not trip on the new window")
	}
}

func TestOpenForThenHalfOpenThenGradualClose(t *testing.T) {
	b, c := newTest(Config{MinRequests: 10, OpenFor: 30 * time.Second, HalfOpenProbes: 3})
	outcomes(t, b, 10, 10)
	if b.State() != Open {
		t.Fatal("not open")
	}
	c.add(30*time.Second - time.Nanosecond)
	if _, ok := b.Allow(); ok {
		t.Fatal("let through before open_for passed")
	}
	c.add(time.Nanosecond)
	// Half-open: exactly 3 probes in flight.
	var gens []uint64
	for range 3 {
		gen, ok := b.Allow()
		if !ok {
			t.Fatal("a probe was refused")
		}
		gens = append(gens, gen)
	}
	if _, ok := b.Allow(); ok {
		t.Fatal("a fourth probe went through")
	}
	if b.State() != HalfOpen {
		t.Fatalf("state %v", b.State())
	}
	// Two successes: still half-open, one slot freed each.
	b.Done(0, gens[0], true)
	b.Done(0, gens[1], true)
	if b.State() != HalfOpen {
		t.Fatal("closed before enough probes succeeded")
	}
	b.Done(0, gens[2], true)
	if b.State() != Closed {
		t.Fatalf("state %v after 3 successful probes", b.State())
	}
}

func TestProbeFailureReopens(t *testing.T) {
	b, c := newTest(Config{MinRequests: 10, OpenFor: time.Second, HalfOpenProbes: 2})
	outcomes(t, b, 10, 10)
	c.add(time.Second)
	g1, _ := b.Allow()
	g2, _ := b.Allow()
	b.Done(0, g1, false)
	if b.State() != Open {
		t.Fatal("a failed probe did not reopen")
	}
	if _, ok := b.Allow(); ok {
		t.Fatal("let through right after reopening")
	}
	b.Done(0, g2, true) // from the half-open generation: ignored
	c.add(time.Second)
	if _, ok := b.Allow(); !ok {
		t.Fatal("no probe after the second open_for")
	}
}

func TestStaleDoneIgnored(t *testing.T) {
	b, c := newTest(Config{MinRequests: 10, OpenFor: time.Second, HalfOpenProbes: 1})
	oldGen, _ := b.Allow() // admitted while closed
	outcomes(t, b, 10, 10)
	c.add(time.Second)
	probe, _ := b.Allow()
	b.Done(0, oldGen, true) // a slow answer from before the trip
	if b.State() != HalfOpen {
		t.Fatal("a stale success moved the half-open breaker")
	}
	b.Done(0, probe, true)
	if b.State() != Closed {
		t.Fatal("the probe's success did not close")
	}
	b.Done(0, oldGen, false) // from two generations ago: not counted
	if st := b.Status(); st.Requests != 0 {
		t.Fatalf("a stale failure was counted: %+v", st)
	}
}

func TestReleaseFreesAProbe(t *testing.T) {
	b, c := newTest(Config{MinRequests: 1, OpenFor: time.Second, HalfOpenProbes: 1})
	outcomes(t, b, 1, 1)
	c.add(time.Second)
	g, _ := b.Allow()
	if _, ok := b.Allow(); ok {
		t.Fatal("second probe")
	}
	b.Release(g) // the probe never reached the upstream
	if _, ok := b.Allow(); !ok {
		t.Fatal("the released slot was not given back")
	}
}

func TestForce(t *testing.T) {
	b, _ := newTest(Config{})
	b.ForceOpen()
	if _, ok := b.Allow(); ok {
		t.Fatal("forced open let through")
	}
	b.ForceClose()
	if _, ok := b.Allow(); !ok {
		t.Fatal("forced close refused")
	}
}

func TestConcurrent(t *testing.T) {
	b := New(Config{MinRequests: 50, OpenFor: time.Millisecond, HalfOpenProbes: 3}, nil)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5000 {
				if gen, ok := b.Allow(); ok {
					b.Done(w, gen, (i+w)%3 != 0) // each goroutine a loop: rows 0 to 7
				}
			}
		}()
	}
	wg.Wait()
	if p := b.probes.Load(); p < 0 || p > 3 {
		t.Fatalf("probe count %d out of bounds", p)
	}
}

func TestAllocs(t *testing.T) {
	if testutil.Race {
		t.Skip("the race detector allocates; make test runs allocation gates without it")
	}
	b := New(Config{}, nil)
	if n := testing.AllocsPerRun(1000, func() {
		gen, _ := b.Allow()
		b.Done(0, gen, true)
	}); n != 0 {
		t.Fatalf("Allow/Done allocate %v times", n)
	}
}

// TestWindowSumsEveryLoopsRow: each loop counts in a row of its own, and
// the breaker judges, and reports, the sum of the rows.
func TestWindowSumsEveryLoopsRow(t *testing.T) {
	b := New(Config{MinRequests: 100, FailureRate: 0.5}, nil)
	for i := range 99 {
		gen, _ := b.Allow()
		b.Done(i%stripe.N, gen, i%2 == 0) // 50 ok, 49 failed, over every row
	}
	if s := b.Status(); s.State != "closed" || s.Requests != 99 || s.FailureRate != 49.0/99 {
		t.Fatalf("after 99 outcomes on %d rows: %+v", stripe.N, s)
	}
	gen, _ := b.Allow()
	b.Done(3, gen, false) // 50 of 100: not above the rate
	gen, _ = b.Allow()
	b.Done(5, gen, false) // 51 of 101
	if b.State() != Open {
		t.Fatalf("state %v after 51 of 101 failed on several rows", b.State())
	}
	b.ForceClose()
	if s := b.Status(); s.Requests != 0 {
		t.Fatalf("ForceClose left %d outcomes in the rows", s.Requests)
	}
}

// BenchmarkAllowDone is a request's breaker work on a closed breaker, each
// parallel goroutine a loop of its own (run with -cpu 2 to see what the
// loops share).
func BenchmarkAllowDone(b *testing.B) {
	br := New(Config{}, nil)
	var loops atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		st := int(loops.Add(1) - 1)
		i := 0
		for pb.Next() {
			gen, _ := br.Allow()
			br.Done(st, gen, i%10 != 0)
			i++
		}
	})
}
