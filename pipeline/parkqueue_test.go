package pipeline

import (
	"slices"
	"testing"
)

type parkedProbe struct {
	name  int
	woken *[]int
}

func (p *parkedProbe) Unpark() { *p.woken = append(*p.woken, p.name) }

// TestParkQueueOrderAndReuse: requests wake first in, first out, a timed-
// out one taken out of the middle never wakes, and a line that empties and
// fills again (a call's answer queue, once a request) allocates nothing.
func TestParkQueueOrderAndReuse(t *testing.T) {
	var woken []int
	var q ParkQueue
	probes := make([]*parkedProbe, 6)
	for i := range probes {
		probes[i] = &parkedProbe{name: i, woken: &woken}
	}
	for _, p := range probes[:4] {
		q.Push(p)
	}
	q.WakeOne()         // 0
	q.Remove(probes[2]) // timed out
	q.Push(probes[4])   // behind 1, 3
	for q.WakeOne() {   // 1, 3, 4
	}
	q.Push(probes[5])
	q.Remove(probes[5])
	if q.WakeOne() {
		t.Fatal("a removed request woke")
	}
	if want := []int{0, 1, 3, 4}; !slices.Equal(woken, want) {
		t.Fatalf("woken %v, want %v", woken, want)
	}
	p := probes[0]
	woken = woken[:0:cap(woken)]
	if n := testing.AllocsPerRun(100, func() {
		q.Push(p)
		q.WakeOne()
		woken = woken[:0]
	}); n != 0 {
		t.Fatalf("%v allocations per park and wake", n)
	}
	// A line longer than its array keeps its order as it grows.
	woken = woken[:0]
	for range 3 {
		for _, p := range probes {
			q.Push(p)
		}
		q.WakeOne()
		q.WakeOne()
	}
	for q.WakeOne() {
	}
	if want := []int{0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}; !slices.Equal(woken, want) {
		t.Fatalf("woken %v, want %v", woken, want)
	}
}
