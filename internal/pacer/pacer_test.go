package pacer

import (
	"testing"
	"time"
)

func ready(c <-chan time.Time) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestPace walks a writer's states: idle on its queue, resting after a
// drain, draining again at once when the queue is half full, and idle
// again after a drain that found nothing.
func TestPace(t *testing.T) {
	p := New()
	defer p.Stop()
	q := make(chan int, 8)
	if Queue(p, q) != q || p.Resting() != nil {
		t.Fatal("a new pace is not idle on its queue")
	}

	p.Drained(3, 1, cap(q))
	if Queue(p, q) != nil || p.Resting() == nil {
		t.Fatal("after a drain that wrote something the writer does not rest")
	}
	if ready(p.Resting()) {
		t.Fatal("the rest ended at once")
	}
	start := time.Now()
	<-p.Resting()
	if took := time.Since(start); took < For/2 {
		t.Fatalf("the rest ended after %v, want about %v", took, For)
	}

	p.Drained(2, cap(q)/2, cap(q))
	if Queue(p, q) != nil || !ready(p.Resting()) {
		t.Fatal("a queue half full does not end the rest at once")
	}

	p.Drained(0, 0, cap(q))
	if Queue(p, q) != q || p.Resting() != nil {
		t.Fatal("after a drain that found nothing the writer is not idle")
	}
}

// TestDrainTakesWhatIsQueued: a drain writes what was queued when it
// began, in order, and no more, however fast the queue fills behind it.
func TestDrainTakesWhatIsQueued(t *testing.T) {
	q := make(chan int, 8)
	for i := range 3 {
		q <- i
	}
	var got []int
	n := Drain(q, func(v int) {
		got = append(got, v)
		q <- 100 + v // queued during the drain: for the next one
	})
	if n != 3 || len(got) != 3 || got[0] != 0 || got[2] != 2 || len(q) != 3 {
		t.Fatalf("drained %d: %v, %d left queued; want 3: [0 1 2], 3 left", n, got, len(q))
	}
	if n := Drain(q, func(int) {}); n != 3 || len(q) != 0 {
		t.Fatalf("second drain %d, %d left", n, len(q))
	}
}
