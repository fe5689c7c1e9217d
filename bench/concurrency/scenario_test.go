package concurrency_test

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/tollgate/tollgate/features"
	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
)

// scenario is the acceptance case: a backend of slots slots × service
// offered three times its capacity in an open loop. The race detector
// slows the gateway several times over, so under it the case is scaled to
// a backend it can still saturate: the same shape, fewer requests.
type scenario struct {
	slots   int
	service time.Duration
	rate    float64
}

func (s scenario) capacity() float64 { return float64(s.slots) / s.service.Seconds() }

func currentScenario() scenario {
	if testutil.Race {
		return scenario{slots: 4, service: 20 * time.Millisecond, rate: 600}
	}
	return scenario{slots: 8, service: 10 * time.Millisecond, rate: 2400}
}

// figuresWanted runs the full-length runs that bench/RESULTS.md reports.
var figuresWanted = os.Getenv("TOLLGATE_CONCURRENCY_FIGURES") != ""

// loadTest skips a test whose bounds are on time where time is not the
// test's own: under the race detector (which slows the gateway several
// times over, and make test runs every package at once under it) and
// with -short. Run them as go test ./bench/concurrency/; the behaviour
// they measure is also tested without load (package adaptive's model
// tests, TestRouteGateParksThenRefuses).
func loadTest(t *testing.T) {
	t.Helper()
	if testutil.Race && !figuresWanted {
		t.Skip("load test: timing bounds do not hold under the race detector beside other packages")
	}
	if testing.Short() {
		t.Skip("load test: -short")
	}
}

const gatewayConfig = `
services:
  protected:
    instances: [{addr: "${UP}"}]
    timeouts: {connect: 500ms, read: 60s, total: 60s}
    concurrency: {limit: adaptive}
  unprotected:
    instances: [{addr: "${UP}"}]
    timeouts: {connect: 500ms, read: 60s, total: 60s}
routes:
  - name: protected
    match: {prefix: /p}
    service: protected
  - name: unprotected
    match: {prefix: /u}
    service: unprotected
`

func startScenario(t *testing.T, s scenario) (*slottedUpstream, *gatewaytest.Gateway) {
	up := startSlotted(t, s.slots, s.service)
	gw := gatewaytest.Start(t, gatewayConfig, gatewaytest.Options{Vars: map[string]string{"UP": up.Addr}})
	return up, gw
}

func describe(name string, s scenario, r *loadResult) string {
	return fmt.Sprintf("| %s | %d | %.0f | %d | %.1f s | %d | %d | %.0f (%.0f %%) | %s | %s | %s | %s |", name, s.slots, s.rate, r.Sent,
		r.Duration.Seconds(), r.Refused, r.Other, r.goodput(), 100*r.goodput()/s.capacity(), ms(quantile(r.OKLatency, 0.5)), ms(quantile(r.OKLatency, 0.99)),
		ms(quantile(r.Refusal, 0.5)), ms(quantile(r.Refusal, 0.99)))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// TestAdaptiveLimitProtectsSaturatedBackend: offered three times what the
// backend can do, the adaptive gate keeps most of its capacity busy,
// answers what it admits quickly and refuses the rest fast. The bounds
// are looser than the acceptance figures (bench/RESULTS.md has those) so
// that a busy machine does not fail it; an unprotected gateway misses
// them by orders of magnitude.
func TestAdaptiveLimitProtectsSaturatedBackend(t *testing.T) {
	loadTest(t)
	s := currentScenario()
	_, gw := startScenario(t, s)
	d := 4 * time.Second
	if figuresWanted {
		d = 10 * time.Second
	}
	r := offer(t, gw.Addr, "/p", s.rate, d, 256, 5*time.Second, nil)
	t.Log(describe("adaptive", s, r))
	st := gateStatus(gw, "protected")
	t.Logf("gate: %+v", st)
	if g := r.goodput(); g < 0.6*s.capacity() {
		t.Errorf("goodput %.0f req/s, want at least 60%% of the backend's %.0f", g, s.capacity())
	}
	if p := quantile(r.OKLatency, 0.99); p > 250*time.Millisecond {
		t.Errorf("p99 of answered requests %s, want well under a second", p)
	}
	if p := quantile(r.Refusal, 0.5); r.Refused == 0 || p > 25*time.Millisecond {
		t.Errorf("%d refusals, median %s: the excess should be refused, fast", r.Refused, p)
	}
	if r.Other > r.Sent/100 {
		t.Errorf("%d of %d requests neither answered nor refused by the gate", r.Other, r.Sent)
	}
	if st.Limit < int64(s.slots)/2 || st.Limit > 4*int64(s.slots) || st.Refused == 0 {
		t.Errorf("gate limit %d for %d backend slots; refused %d", st.Limit, s.slots, st.Refused)
	}
	if figuresWanted {
		r := offer(t, gw.Addr, "/u", s.rate, d, 512, 60*time.Second, nil)
		t.Log(describe("unprotected", s, r))
	}
}

// TestAdaptiveLimitFollowsCapacity: the backend's slots halve mid-run and
// come back; the limit goes down with them and up again, and goodput
// stays near each capacity.
func TestAdaptiveLimitFollowsCapacity(t *testing.T) {
	loadTest(t)
	s := currentScenario()
	up, gw := startScenario(t, s)
	phase := 3 * time.Second
	if figuresWanted {
		phase = 5 * time.Second
	}
	var mu sync.Mutex
	limits := map[int][]int64{} // by phase, the limits of its last second
	var trace strings.Builder
	r := offer(t, gw.Addr, "/p", s.rate, 3*phase, 256, 5*time.Second, func(at time.Duration) {
		p := int(at / phase)
		switch p {
		case 1:
			up.setSlots(s.slots / 2)
		case 2:
			up.setSlots(s.slots)
		}
		st := gateStatus(gw, "protected")
		mu.Lock()
		defer mu.Unlock()
		if at%phase > phase-time.Second {
			limits[p] = append(limits[p], st.Limit)
		}
		if at%(500*time.Millisecond) < 100*time.Millisecond {
			fmt.Fprintf(&trace, "%.1fs limit %d rtt %.1f/%.1f ms; ", at.Seconds(), st.Limit, st.RTTZero, st.RTT)
		}
	})
	t.Log(describe("adaptive, slots halved then restored", s, r))
	t.Log(trace.String())
	mean := func(p int) float64 {
		mu.Lock()
		defer mu.Unlock()
		var sum int64
		for _, l := range limits[p] {
			sum += l
		}
		return float64(sum) / float64(max(1, len(limits[p])))
	}
	full, halved, restored := mean(0), mean(1), mean(2)
	t.Logf("mean limit in the last second of each phase: %.1f, %.1f (halved), %.1f", full, halved, restored)
	if halved >= full || restored <= halved {
		t.Errorf("the limit did not follow the backend: %.1f, halved %.1f, restored %.1f", full, halved, restored)
	}
	capacity := s.capacity() * (1 + 0.5 + 1) / 3
	if g := r.goodput(); g < 0.6*capacity {
		t.Errorf("goodput %.0f req/s, want at least 60%% of the run's mean capacity %.0f", g, capacity)
	}
	if p := quantile(r.OKLatency, 0.99); p > 250*time.Millisecond {
		t.Errorf("p99 of answered requests %s", p)
	}
}
