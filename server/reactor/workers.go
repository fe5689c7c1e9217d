//go:build linux

package reactor

import (
	"sync"
	"time"
)

// A fresh goroutine per dispatch starts on a small stack and grows it,
// copying, to what parsing and proxying a request need: measured at 6 % of
// the transport's CPU, with the goroutine's creation and exit on top. The
// worker pool keeps goroutines (and their grown stacks) between requests:
// a finished worker waits for the next connection to serve, the most
// recently used first (its stack is the one still in cache), and workers
// idle for workerIdle exit, so the goroutine count falls back to its base
// when the load ends.
const (
	workerIdle  = time.Second
	workerSweep = 250 * time.Millisecond
)

type parkedWorker struct {
	next chan *clientConn // capacity 1; nil asks the worker to exit
	idle int64            // when it last parked (transport clock, ns)
}

type workerPool struct {
	mu    sync.Mutex
	ready []*parkedWorker // parked, least recently used first
	done  bool
	quit  chan struct{}
	ended chan struct{}
}

func newWorkerPool() *workerPool {
	return &workerPool{quit: make(chan struct{}), ended: make(chan struct{})}
}

// serveOnWorker hands c to a parked worker, or starts one.
func (t *reactorTransport) serveOnWorker(c *clientConn) {
	p := t.workers
	p.mu.Lock()
	if n := len(p.ready); n > 0 {
		w := p.ready[n-1]
		p.ready[n-1] = nil
		p.ready = p.ready[:n-1]
		p.mu.Unlock()
		w.next <- c
		return
	}
	p.mu.Unlock()
	go t.worker(c)
}

// worker serves c, then every connection handed to it, until it idles out
// or the transport stops.
func (t *reactorTransport) worker(c *clientConn) {
	w := &parkedWorker{next: make(chan *clientConn, 1)}
	p := t.workers
	for c != nil {
		c.serve()
		p.mu.Lock()
		if p.done {
			p.mu.Unlock()
			return
		}
		w.idle = t.now()
		p.ready = append(p.ready, w)
		p.mu.Unlock()
		c = <-w.next
	}
}

// sweepWorkers retires the workers idle for workerIdle, until stopWorkers.
func (t *reactorTransport) sweepWorkers() {
	p := t.workers
	defer close(p.ended)
	tick := time.NewTicker(workerSweep)
	defer tick.Stop()
	var retire []*parkedWorker
	for {
		select {
		case <-p.quit:
			p.mu.Lock()
			p.done = true
			retire = append(retire[:0], p.ready...)
			clear(p.ready)
			p.ready = p.ready[:0]
			p.mu.Unlock()
			for _, w := range retire {
				w.next <- nil
			}
			return
		case <-tick.C:
		}
		old := t.now() - int64(workerIdle)
		p.mu.Lock()
		n := 0
		for n < len(p.ready) && p.ready[n].idle <= old {
			n++
		}
		retire = append(retire[:0], p.ready[:n]...)
		rest := copy(p.ready, p.ready[n:])
		clear(p.ready[rest:])
		p.ready = p.ready[:rest]
		p.mu.Unlock()
		for i, w := range retire {
			w.next <- nil
			retire[i] = nil
		}
	}
}

// stopWorkers makes the parked workers exit and the busy ones exit when
// done; it waits for the sweeper only.
func (t *reactorTransport) stopWorkers() {
	close(t.workers.quit)
	<-t.workers.ended
}
