// Package pacer paces a goroutine that writes out what requests queue (the
// access log, traffic recording), so that the requests do not wake it one
// item at a time.
//
// A writer waiting on its queue is woken by the request that queues an
// item: a futex call on the request's thread and another thread woken, per
// request, whenever requests come further apart than an item takes to
// write. Paced, the writer still waits on the queue while idle; once an
// item comes it drains the queue and then rests on a timer before the next
// drain, until a drain finds nothing. No request wakes a resting writer.
package pacer

import "time"

// For is how long a writer rests between drains while items keep coming.
const For = time.Millisecond

// Pace is one writer's state. Its zero value is not ready: use New. It is
// used by the writer's goroutine only.
type Pace struct {
	nap     *time.Timer
	awake   chan time.Time // closed: a rest that ends at once
	resting <-chan time.Time
}

// New returns a pace that is idle: the writer waits on its queue.
func New() *Pace {
	p := &Pace{nap: time.NewTimer(For), awake: make(chan time.Time)}
	p.nap.Stop()
	close(p.awake)
	return p
}

// Queue is q while the writer is idle and nil while it rests, for the
// writer's select: a nil channel is never ready, so a resting writer is
// not woken by what is queued.
func Queue[T any](p *Pace, q chan T) chan T {
	if p.resting != nil {
		return nil
	}
	return q
}

// Resting is ready when a rest ends; nil while idle.
func (p *Pace) Resting() <-chan time.Time { return p.resting }

// Drained tells the pace what the last drain wrote, and how full the queue
// is now (len and cap). With nothing written the writer goes idle;
// otherwise it rests, or drains again at once when the queue is half full,
// rather than drop what a rest would not leave room for.
func (p *Pace) Drained(n, queued, capacity int) {
	switch {
	case n == 0:
		p.resting = nil
	case queued >= capacity/2:
		p.resting = p.awake
	default:
		p.nap.Reset(For)
		p.resting = p.nap.C
	}
}

// Drain writes with write the items queued in q now, and no more, so that
// a queue that never empties still lets the writer flush, reopen and stop;
// it reports how many.
func Drain[T any](q chan T, write func(T)) (n int) {
	for range len(q) {
		write(<-q)
		n++
	}
	return n
}

// Stop stops the timer, for a writer that returns.
func (p *Pace) Stop() { p.nap.Stop() }
