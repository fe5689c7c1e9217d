//go:build linux

package reactor

import (
	"iter"
	"testing"
)

// BenchmarkCoroutineSwitch is the cost of resuming a fiber and getting
// control back (iter.Pull's direct switch), what the event loops pay per
// wait instead of BenchmarkGoroutineHandoff's trip through the scheduler.
func BenchmarkCoroutineSwitch(b *testing.B) {
	next, stop := iter.Pull(func(yield func(int) bool) {
		for i := 0; yield(i); i++ {
		}
	})
	defer stop()
	b.ReportAllocs()
	for b.Loop() {
		next()
	}
}

// BenchmarkGoroutineHandoff is a round trip to another goroutine over
// unbuffered channels, how work changes goroutines off the loops (a
// blocking call, the retired dispatch mode).
func BenchmarkGoroutineHandoff(b *testing.B) {
	to, back := make(chan int), make(chan int)
	go func() {
		for v := range to {
			back <- v
		}
	}()
	defer close(to)
	b.ReportAllocs()
	for b.Loop() {
		to <- 1
		<-back
	}
}
