package upstream

import (
	"strings"
	"testing"
	"time"
)

func instances(weights ...int) []*Instance {
	out := make([]*Instance, len(weights))
	for i, w := range weights {
		out[i] = &Instance{Addr: string(rune('a' + i)), Weight: w}
	}
	return out
}

func sequence(b Balancer, n int) string {
	var sb strings.Builder
	for range n {
		sb.WriteString(b.Pick(nil).Addr)
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
	ins[1].markRefused(time.Now())
	rr := NewRoundRobin(ins)
	if got := sequence(rr, 6); strings.Contains(got, "b") {
		t.Fatalf("picked a cooling-down instance: %s", got)
	}
	// exclude + unavailable leaves one instance.
	for range 5 {
		if in := rr.Pick(ins[0]); in != ins[2] {
			t.Fatalf("picked %v, want c", in.Addr)
		}
	}
	// Everything down but the excluded one: the cool-down instance is the
	// last resort, the excluded one never is.
	ins[2].markRefused(time.Now())
	if in := rr.Pick(ins[0]); in == nil || in == ins[0] {
		t.Fatalf("last resort returned %v", in)
	}
	ins[1].SetDisabled(true)
	ins[2].SetDisabled(true)
	if in := rr.Pick(ins[0]); in != nil {
		t.Fatalf("disabled instances must never be picked, got %s", in.Addr)
	}
}

func TestLeastConn(t *testing.T) {
	ins := instances(1, 1, 2)
	lc := NewLeastConn(ins)
	ins[0].inflight.Store(5)
	ins[1].inflight.Store(1)
	ins[2].inflight.Store(3) // 3/2 = 1.5 > 1
	if got := lc.Pick(nil); got != ins[1] {
		t.Fatalf("picked %s, want b", got.Addr)
	}
	if got := lc.Pick(ins[1]); got != ins[2] {
		t.Fatalf("excluding b picked %s, want c", got.Addr)
	}
	// Equal load: the choice rotates.
	for _, in := range ins {
		in.inflight.Store(0)
	}
	seen := map[string]bool{}
	for range 6 {
		seen[lc.Pick(nil).Addr] = true
	}
	if len(seen) != 3 {
		t.Fatalf("equal instances not shared: %v", seen)
	}
}

func BenchmarkRoundRobinPick(b *testing.B) {
	rr := NewRoundRobin(instances(3, 1, 2))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = rr.Pick(nil)
		}
	})
}
