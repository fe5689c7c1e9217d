package adaptive

import (
	"math"
	"math/rand/v2"
	"testing"
)

// poisson draws a count of mean lambda (normal approximation; lambda is
// large here).
func poisson(r *rand.Rand, lambda float64) float64 {
	return math.Max(0, math.Round(lambda+math.Sqrt(lambda)*r.NormFloat64()))
}

// TestSpikeRaisesOneAlertAndOneRecovery: a route at 200 req/s for an
// hour gets 10× that for 20 s: one alert within 10 s, one recovery after,
// and nothing more.
func TestSpikeRaisesOneAlertAndOneRecovery(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	b := baseline{floor: 1}
	var events []alertEvent
	var at []int
	for s := range 3600 + 20 + 600 {
		rate := 200.0
		if s >= 3600 && s < 3620 {
			rate = 2000
		}
		if e := b.observe(poisson(r, rate), 6); e != noEvent {
			events, at = append(events, e), append(at, s)
		}
	}
	if len(events) != 2 || events[0] != raised || events[1] != recovered {
		t.Fatalf("events %v at %v, want one raised and one recovered", events, at)
	}
	if at[0]-3600 > 10 || at[1] < 3620 || at[1]-3620 > 30 {
		t.Fatalf("raised %d s into the spike, recovered %d s after it", at[0]-3600, at[1]-3620)
	}
}

// TestDiurnalPatternRaisesNothing: a simulated day whose traffic rises
// from 50 to 950 req/s and falls back, with Poisson noise, and an error
// rate and latency that follow the load a little, raise no alert.
func TestDiurnalPatternRaisesNothing(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	rate, errs, lat := baseline{floor: 1}, baseline{floor: 0.005}, baseline{floor: 0.5}
	for s := range 2 * 86400 {
		load := 500 - 450*math.Cos(2*math.Pi*float64(s)/86400)
		n := poisson(r, load)
		for _, c := range []struct {
			b *baseline
			x float64
		}{
			{&rate, n},
			{&errs, poisson(r, 0.002*n) / math.Max(n, 1)},
			{&lat, 20 + 10*load/1000 + 2*r.NormFloat64()},
		} {
			if e := c.b.observe(c.x, 6); e != noEvent {
				t.Fatalf("alert %d at %d s of a steady day (x %.3f, mean %.3f, dev %.3f)", e, s, c.x, c.b.mean, c.b.dev)
			}
		}
	}
}

// TestLastingShiftBecomesNormal: a level that stays raised for half an
// hour is taken as the new normal, with one recovery, and is then
// judged against.
func TestLastingShiftBecomesNormal(t *testing.T) {
	b := baseline{floor: 1}
	for range warmup + 10 {
		b.observe(100, 6)
	}
	var events []alertEvent
	for range adoptAfter + 10 {
		if e := b.observe(300, 6); e != noEvent {
			events = append(events, e)
		}
	}
	if len(events) != 2 || events[1] != recovered || b.mean != 300 {
		t.Fatalf("events %v, mean %.0f", events, b.mean)
	}
}
