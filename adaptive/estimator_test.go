package adaptive

import (
	"math/rand/v2"
	"testing"
	"time"
)

// backendModel is the latency a saturated backend of slots slots, each
// busy service per request, shows with inFlight requests in flight:
// requests past its slots queue in it.
type backendModel struct {
	slots   int
	service time.Duration
	noise   float64 // ± share of each sample
	rng     *rand.Rand
}

func (m *backendModel) latency(inFlight int64) time.Duration {
	rounds := max(1, float64(inFlight)/float64(m.slots))
	d := float64(m.service) * rounds
	if m.noise > 0 {
		d *= 1 + m.noise*(2*m.rng.Float64()-1)
	}
	return time.Duration(d)
}

// drive offers the estimator more than its limit for d of simulated time:
// every completion finds the limit's worth in flight, as under overload.
// It returns the limits seen at each window.
func drive(e *estimator, m *backendModel, clock *time.Time, d time.Duration) []int64 {
	var seen []int64
	end := clock.Add(d)
	for clock.Before(end) {
		inFlight := e.limit.Load()
		lat := m.latency(inFlight)
		for range windowSamples {
			e.record(e.epoch.Load(), lat, false, inFlight, clock.UnixNano())
			// Completions at inFlight concurrency come lat/inFlight apart.
			*clock = clock.Add(lat / time.Duration(inFlight))
		}
		seen = append(seen, e.limit.Load())
	}
	return seen
}

func adaptiveSettings(t *testing.T) *Settings {
	s := &Settings{}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestVegasFollowsCapacity: the limit settles a few requests above the
// backend's slots, follows when they halve, and recovers when they come
// back, each within 5 s of (simulated) saturated traffic.
func TestVegasFollowsCapacity(t *testing.T) {
	clock := time.Unix(1_000_000, 0)
	e := newEstimator(adaptiveSettings(t), clock)
	m := &backendModel{slots: 8, service: 10 * time.Millisecond}
	settled := func(phase string, slots int) {
		t.Helper()
		seen := drive(e, m, &clock, 5*time.Second)
		last := seen[len(seen)-10:]
		for _, l := range last {
			if l < int64(slots) || l > int64(slots)+8 {
				t.Fatalf("%s: limits of the last windows %v, want within [%d, %d]", phase, last, slots, slots+8)
			}
		}
		t.Logf("%s: limits of the last windows %v", phase, last)
		if z := time.Duration(e.rttZero.Load()); z < 9*time.Millisecond || z > 11*time.Millisecond {
			t.Fatalf("%s: no-load latency %s, want 10ms", phase, z)
		}
	}
	settled("start", 8)
	m.slots = 4
	settled("halved", 4)
	m.slots = 8
	settled("restored", 8)
	if e.probes.Load() < 2 {
		t.Fatalf("%d probes in 15s, want one at start and more every ~10s", e.probes.Load())
	}
}

// TestVegasNoisyLatency: samples ±40% around their mean move the limit
// less than the capacity it tracks; it neither collapses to min nor runs
// away.
func TestVegasNoisyLatency(t *testing.T) {
	clock := time.Unix(1_000_000, 0)
	e := newEstimator(adaptiveSettings(t), clock)
	m := &backendModel{slots: 16, service: 10 * time.Millisecond, noise: 0.4, rng: rand.New(rand.NewPCG(1, 2))}
	seen := drive(e, m, &clock, 30*time.Second)
	var sum int64
	tail := seen[len(seen)/2:]
	for _, l := range tail {
		sum += l
	}
	mean := float64(sum) / float64(len(tail))
	if mean < 12 || mean > 32 {
		t.Fatalf("mean limit %.1f over the last 15s with 16 slots and noisy latency, want 12..32", mean)
	}
}

// TestProbeForgetsOldLow: a backend that became slower for every request
// (a deploy) reads at first as a queue, but the next probe measures the
// new no-load latency and the limit comes back to its capacity.
func TestProbeForgetsOldLow(t *testing.T) {
	clock := time.Unix(1_000_000, 0)
	e := newEstimator(adaptiveSettings(t), clock)
	m := &backendModel{slots: 8, service: 10 * time.Millisecond}
	drive(e, m, &clock, 3*time.Second)
	m.service = 30 * time.Millisecond
	seen := drive(e, m, &clock, 3*probeEvery/2)
	if z := time.Duration(e.rttZero.Load()); z < 28*time.Millisecond || z > 32*time.Millisecond {
		t.Fatalf("no-load latency %s after a probe, want the new 30ms", z)
	}
	if l := seen[len(seen)-1]; l < 8 {
		t.Fatalf("limit %d after the probe, want at least the 8 slots (limits: %v)", l, seen[len(seen)-20:])
	}
}

// TestProbeIgnoresEarlierAdmissions: while a probe runs, completions of
// requests admitted before it do not count, and the probe window (at
// min concurrency) sets the no-load latency.
func TestProbeIgnoresEarlierAdmissions(t *testing.T) {
	clock := time.Unix(1_000_000, 0)
	e := newEstimator(adaptiveSettings(t), clock)
	if e.phase.Load() != phaseProbing || e.limit.Load() != defaultMin {
		t.Fatalf("a new gate should probe at min first: phase %d limit %d", e.phase.Load(), e.limit.Load())
	}
	old := e.epoch.Load() - 1
	for range 3 * windowSamples {
		e.record(old, 500*time.Millisecond, false, 40, clock.UnixNano())
	}
	if e.rttZero.Load() != 0 || e.phase.Load() != phaseProbing {
		t.Fatal("completions admitted before the probe were counted")
	}
	for range windowSamples {
		e.record(e.epoch.Load(), 12*time.Millisecond, false, 4, clock.UnixNano())
	}
	if z := time.Duration(e.rttZero.Load()); z != 12*time.Millisecond || e.phase.Load() != phaseSteady {
		t.Fatalf("after the probe window: rtt0 %s phase %d, want 12ms and steady", z, e.phase.Load())
	}
}

// TestProbeGivesUp: a probe whose window never fills (requests admitted
// before it hold the slots) ends after probeTimeout with the old limit.
func TestProbeGivesUp(t *testing.T) {
	clock := time.Unix(1_000_000, 0)
	e := newEstimator(adaptiveSettings(t), clock)
	clock = clock.Add(probeTimeout + time.Millisecond)
	e.record(e.epoch.Load()-1, time.Second, false, 4, clock.UnixNano())
	if e.phase.Load() != phaseSteady {
		t.Fatal("a probe past its timeout did not end")
	}
}

// TestDropsCutTheLimit: a window with upstream failures lowers the limit
// even when latency looks fine.
func TestDropsCutTheLimit(t *testing.T) {
	clock := time.Unix(1_000_000, 0)
	e := newEstimator(adaptiveSettings(t), clock)
	m := &backendModel{slots: 64, service: 10 * time.Millisecond}
	drive(e, m, &clock, 3*time.Second)
	before := e.limit.Load()
	for range windowSamples {
		e.record(e.epoch.Load(), 10*time.Millisecond, true, before, clock.UnixNano())
	}
	if after := e.limit.Load(); after >= before {
		t.Fatalf("limit %d after a window of failures, was %d", after, before)
	}
}
