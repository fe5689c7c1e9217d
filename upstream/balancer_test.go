package upstream

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/stripe"
	"github.com/tollgate/tollgate/internal/testutil"

	"github.com/cespare/xxhash/v2"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/source"
	"github.com/valyala/fasthttp"
)

func instances(weights ...int) []*Instance {
	out := make([]*Instance, len(weights))
	for i, w := range weights {
		out[i] = &Instance{Addr: string(rune('a' + i)), Weight: w, health: newHealth(Health{}, nil)}
	}
	return out
}

func sequence(b Balancer, n int) string {
	var sb strings.Builder
	for range n {
		sb.WriteString(b.Pick(nil, nil).Addr)
	}
	return sb.String()
}

func TestRoundRobinSmooth(t *testing.T) {
	for _, tc := range []struct {
		weights []int
		want    string
	}{
		{[]int{1, 1, 1}, "abcabc"},
		{[]int{3, 1}, "aabaaaba"},
		{[]int{5, 1, 1}, "aabacaaaabacaa"},
		{[]int{300, 100}, "aaba"},
		{[]int{0, 0}, "abab"}, // weight below 1 counts as 1
	} {
		if got := sequence(NewRoundRobin(instances(tc.weights...)), len(tc.want)); got != tc.want {
			t.Errorf("weights %v: got %s, want %s", tc.weights, got, tc.want)
		}
	}
}

func TestRoundRobinSkipsUnavailable(t *testing.T) {
	ins := instances(1, 1, 1)
	ins[1].health.ejected.Store(true)
	rr := NewRoundRobin(ins)
	if got := sequence(rr, 6); strings.Contains(got, "b") {
		t.Fatalf("picked an ejected instance: %s", got)
	}
	// exclude + unavailable leaves one instance.
	for range 5 {
		if in := rr.Pick(nil, ins[0]); in != ins[2] {
			t.Fatalf("picked %v, want c", in.Addr)
		}
	}
	// Everything out but the excluded one: a retry gets nothing (it never
	// goes to an ejected instance); a first try gets the last resort.
	ins[2].health.ejected.Store(true)
	if in := rr.Pick(nil, ins[0]); in != nil {
		t.Fatalf("a retry was sent to ejected %s", in.Addr)
	}
	ins[0].health.ejected.Store(true)
	if in := rr.Pick(nil, nil); in == nil {
		t.Fatal("no last resort for a first try with every instance ejected")
	}
	for _, in := range ins {
		in.SetDisabled(true)
	}
	if in := rr.Pick(nil, nil); in != nil {
		t.Fatalf("disabled instances must never be picked, got %s", in.Addr)
	}
}

func TestLeastConn(t *testing.T) {
	ins := instances(1, 1, 2)
	lc := NewLeastConn(ins)
	setInFlight(ins[0], 5)
	setInFlight(ins[1], 1)
	setInFlight(ins[2], 3) // 3/2 = 1.5 > 1
	if got := lc.Pick(nil, nil); got != ins[1] {
		t.Fatalf("picked %s, want b", got.Addr)
	}
	if got := lc.Pick(nil, ins[1]); got != ins[2] {
		t.Fatalf("excluding b picked %s, want c", got.Addr)
	}
	// Equal load: the choice rotates.
	for _, in := range ins {
		setInFlight(in, 0)
	}
	seen := map[string]bool{}
	for range 6 {
		seen[lc.Pick(nil, nil).Addr] = true
	}
	if len(seen) != 3 {
		t.Fatalf("equal instances not shared: %v", seen)
	}
}

// setInFlight makes n the instance's requests in flight, counted in
// several stripes as loops count them.
func setInFlight(in *Instance, n int64) {
	for i := range in.load {
		in.load[i].inflight.Store(0)
	}
	in.load[0].inflight.Store(n / 2)
	in.load[stripe.N-1].inflight.Store(n - n/2)
}

func BenchmarkRoundRobinPick(b *testing.B) {
	rr := NewRoundRobin(instances(3, 1, 2))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = rr.Pick(nil, nil)
		}
	})
}

func hashOf(ins []*Instance) *Hash {
	key, _ := source.Parse("header.X-User-Id")
	return NewHash(ins, key)
}

// TestHashKeepsKeysAndMovesAboutOneNth: a key keeps its instance; ejecting
// one of N moves only that instance's keys (about 1/N), and adding an
// instance moves about 1/(N+1).
func TestHashKeepsKeysAndMovesAboutOneNth(t *testing.T) {
	const keys = 20000
	owner := func(h *Hash) []string {
		out := make([]string, keys)
		for i := range keys {
			out[i] = h.owner(xxhash.Sum64String("user-"+strconv.Itoa(i)), nil).Addr
		}
		return out
	}
	ins := instances(1, 1, 1, 1, 1)
	h := hashOf(ins)
	before := owner(h)
	if again := owner(h); !slices.Equal(before, again) {
		t.Fatal("a key changed instance with nothing changed")
	}
	ins[2].health.ejected.Store(true)
	after := owner(h)
	moved := 0
	for i := range keys {
		if before[i] != after[i] {
			moved++
			if before[i] != ins[2].Addr {
				t.Fatalf("key %d moved from %s, which is still up", i, before[i])
			}
		}
	}
	share := float64(moved) / keys
	t.Logf("ejecting 1 of 5 moved %.1f%% of keys", 100*share)
	if share < 0.15 || share > 0.25 {
		t.Fatalf("ejecting 1 of 5 moved %.1f%% of keys, want about 20%%", 100*share)
	}
	ins[2].health.ejected.Store(false)
	if back := owner(h); !slices.Equal(before, back) {
		t.Fatal("keys did not return to the recovered instance")
	}
	grown := owner(hashOf(append(instances(1, 1, 1, 1, 1), &Instance{Addr: "f", Weight: 1, health: newHealth(Health{}, nil)})))
	moved = 0
	for i := range keys {
		if before[i] != grown[i] {
			moved++
			if grown[i] != "f" {
				t.Fatalf("adding an instance moved key %d between old instances", i)
			}
		}
	}
	share = float64(moved) / keys
	t.Logf("adding a 6th instance moved %.1f%% of keys", 100*share)
	if share < 0.11 || share > 0.23 {
		t.Fatalf("adding a 6th instance moved %.1f%% of keys, want about 17%%", 100*share)
	}
}

func TestHashPickAllocs(t *testing.T) {
	if testutil.Race {
		t.Skip("the race detector allocates; make test runs allocation gates without it")
	}
	h := hashOf(instances(1, 2, 1))
	var req fasthttp.Request
	req.SetRequestURI("/x")
	req.Header.SetHost("h")
	req.Header.Set("X-User-Id", "u-42")
	c := pipeline.AcquireParsed(&req, new(fasthttp.Response))
	defer pipeline.Release(c)
	first := h.Pick(c, nil)
	if n := testing.AllocsPerRun(100, func() {
		if h.Pick(c, nil) != first {
			t.Fatal("the same key moved")
		}
	}); n != 0 {
		t.Fatalf("Pick allocates %v times", n)
	}
}

// TestBalancersStayBoundedForHugeSets: thousands of instances with uneven
// weights (what a registry can list) build in bounded time and memory,
// and keep their weights' order.
func TestBalancersStayBoundedForHugeSets(t *testing.T) {
	weights := make([]int, 4096)
	for i := range weights {
		weights[i] = 1 + 99*(i%2) // 1, 100, 1, 100, …
	}
	ins := instances(weights...)
	start := time.Now()
	rr := NewRoundRobin(ins)
	h := hashOf(ins)
	// A bound on blowing up (the work bound below is the exact one): a
	// build of 4,096 instances takes well under a second alone, and up to
	// several under the race detector on a busy machine.
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("building took %v", took)
	}
	if n := len(rr.schedule) * len(ins); n > maxScheduleWork {
		t.Fatalf("round robin cycle of %d for %d instances", len(rr.schedule), len(ins))
	}
	if len(h.points) > maxRingPoints {
		t.Fatalf("hash ring of %d points", len(h.points))
	}
	count := map[string]int{}
	for _, i := range rr.schedule {
		count[rr.instances[i].Addr]++
	}
	if light, heavy := count[ins[0].Addr], count[ins[1].Addr]; heavy <= light {
		t.Fatalf("a weight-100 instance has %d turns, a weight-1 one %d", heavy, light)
	}
}
