package observe

import (
	"sync"
	"testing"
)

// TestStatsSumStripes: loops count in stripes of their own, concurrently;
// Read gives the totals.
func TestStatsSumStripes(t *testing.T) {
	var s Stats
	var wg sync.WaitGroup
	for loop := range 10 { // more loops than stripes: some share one
		wg.Go(func() {
			for i := range 1000 {
				s.Begin(loop)
				s.End(loop, 200+300*(i%2)) // 2xx and 5xx
			}
			s.Begin(loop) // one still in flight
			s.ParseError(loop)
		})
	}
	wg.Wait()
	got := s.Read()
	want := Snapshot{Requests: 10000, ParseErrors: 10, InFlight: 10}
	want.ByClass[2], want.ByClass[5] = 5000, 5000
	if got != want {
		t.Fatalf("Read() = %+v, want %+v", got, want)
	}
}
