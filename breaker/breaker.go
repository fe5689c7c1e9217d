// Package breaker is the gateway's circuit breaker: a failure-ratio breaker
// over a sliding window, with a half-open state that lets a few probes
// through and closes only after they succeed.
//
// States: closed (everything passes; outcomes are counted in a sliding
// window of buckets), open (nothing passes for OpenFor), half-open (at most
// HalfOpenProbes requests in flight; HalfOpenProbes successes in a row
// close the breaker, one failure opens it again).
//
// The breaker trips when, within the window, at least MinRequests outcomes
// were counted and more than FailureRate of them failed.
//
// Every state change starts a new generation. Allow returns the generation
// a request was admitted in; Done with an older generation is ignored, so
// a slow answer from before a trip cannot close a breaker that has since
// opened, nor count in a window that has been reset.
//
// Allow and Done are safe for concurrent use, take no lock and allocate
// nothing: the state and generation are one atomic word, the window's
// buckets are atomic counters. Each loop counts in a row of buckets of its
// own (its stripe), so that loops counting every request's outcome never
// write the same cache line; the window is the sum of the rows.
package breaker

import (
	"errors"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tollgate/tollgate/internal/stripe"
)

// Config is a breaker's settings; zero fields take the defaults beside
// them.
type Config struct {
	Window         time.Duration // 10s, counted in Buckets buckets
	Buckets        int           // 10
	FailureRate    float64       // 0.5: trips above this share of failures
	MinRequests    int           // 100: no trip with fewer outcomes in the window
	OpenFor        time.Duration // 30s
	HalfOpenProbes int           // 5: probes in flight, and successes needed to close
}

func (c Config) withDefaults() Config {
	if c.Window <= 0 {
		c.Window = 10 * time.Second
	}
	if c.Buckets <= 0 {
		c.Buckets = 10
	}
	if c.FailureRate <= 0 {
		c.FailureRate = 0.5
	}
	if c.MinRequests <= 0 {
		c.MinRequests = 100
	}
	if c.OpenFor <= 0 {
		c.OpenFor = 30 * time.Second
	}
	if c.HalfOpenProbes <= 0 {
		c.HalfOpenProbes = 5
	}
	return c
}

// Validate reports settings that make no sense.
func (c Config) Validate() error {
	switch {
	case c.FailureRate < 0 || c.FailureRate >= 1:
		return errors.New("breaker.failure_rate must be in (0, 1)")
	case c.Buckets > 600:
		return errors.New("breaker: at most 600 buckets")
	case c.Window > 0 && c.Buckets > 0 && c.Window/time.Duration(c.Buckets) < time.Millisecond:
		return errors.New("breaker: buckets shorter than 1ms")
	case c.MinRequests < 0 || c.HalfOpenProbes < 0:
		return errors.New("breaker: min_requests and half_open_probes must not be negative")
	}
	return nil
}

// State is where a breaker stands.
type State uint8

const (
	Closed State = iota
	Open
	HalfOpen
)

var stateNames = [...]string{"closed", "open", "half_open"}

func (s State) String() string { return stateNames[s] }

// Breaker is one circuit breaker.
type Breaker struct {
	cfg    Config
	now    func() time.Time
	bucket int64 // bucket length, ns

	// word is generation<<2 | state.
	word atomic.Uint64
	// openedAt (unix ns) is when the breaker last opened.
	openedAt atomic.Int64
	// In half-open: probes in flight, and successes in a row.
	probes    atomic.Int32
	successes atomic.Int32

	// buckets holds one row of cfg.Buckets buckets per stripe (row),
	// each row a cache line away from the next and from the ends.
	buckets []bucket
	stride  int // buckets from one row's start to the next's
	trips   atomic.Uint64
}

type bucket struct {
	epoch atomic.Int64 // which bucket-length slot of time it counts
	ok    atomic.Uint32
	fail  atomic.Uint32
}

// lineBuckets is how many buckets fill a cache line.
const lineBuckets = int(unsafe.Sizeof(stripe.Pad{}) / unsafe.Sizeof(bucket{}))

// New returns a closed breaker; now is the clock (time.Now when nil).
func New(cfg Config, now func() time.Time) *Breaker {
	cfg = cfg.withDefaults()
	if now == nil {
		now = time.Now
	}
	// A row in whole lines plus a line of gap, whatever the alignment.
	stride := (cfg.Buckets+lineBuckets-1)/lineBuckets*lineBuckets + lineBuckets
	b := &Breaker{cfg: cfg, now: now, bucket: int64(cfg.Window) / int64(cfg.Buckets),
		buckets: make([]bucket, lineBuckets+stripe.N*stride), stride: stride}
	b.resetWindow()
	return b
}

// row is stripe st's buckets.
func (b *Breaker) row(st int) []bucket {
	at := lineBuckets + stripe.Of(st)*b.stride
	return b.buckets[at : at+b.cfg.Buckets]
}

func pack(gen uint64, s State) uint64 { return gen<<2 | uint64(s) }
func unpack(w uint64) (uint64, State) { return w >> 2, State(w & 3) }

// Allow reports whether a request may go through, and the generation it
// is admitted in, to hand back to Done.
func (b *Breaker) Allow() (gen uint64, ok bool) {
	for {
		w := b.word.Load()
		gen, st := unpack(w)
		switch st {
		case Closed:
			return gen, true
		case Open:
			if b.now().UnixNano()-b.openedAt.Load() < int64(b.cfg.OpenFor) {
				return gen, false
			}
			// Open long enough: the first to see it moves to half-open.
			if b.word.CompareAndSwap(w, pack(gen+1, HalfOpen)) {
				b.probes.Store(0)
				b.successes.Store(0)
			}
			continue
		case HalfOpen:
			if b.probes.Add(1) > int32(b.cfg.HalfOpenProbes) {
				b.probes.Add(-1)
				return gen, false
			}
			if b.word.Load() != w { // the state moved meanwhile
				b.probes.Add(-1)
				continue
			}
			return gen, true
		}
	}
}

// Done reports how a request admitted in generation gen ended, counted in
// the row of stripe st (pipeline.Ctx.Stripe). A result from an older
// generation is ignored.
func (b *Breaker) Done(st int, gen uint64, success bool) {
	w := b.word.Load()
	cur, state := unpack(w)
	if gen != cur {
		return
	}
	switch state {
	case Closed:
		now := b.now().UnixNano()
		b.record(st, now, success)
		if !success && b.shouldTrip(now) {
			b.trip(w, now)
		}
	case HalfOpen:
		b.probes.Add(-1)
		if !success {
			b.trip(w, b.now().UnixNano())
			return
		}
		if b.successes.Add(1) >= int32(b.cfg.HalfOpenProbes) && b.word.CompareAndSwap(w, pack(gen+1, Closed)) {
			b.resetWindow()
		}
	}
}

// Release gives back an admission that produced no outcome (the request
// never reached the upstream): a half-open probe slot is freed, nothing is
// counted.
func (b *Breaker) Release(gen uint64) {
	if cur, st := unpack(b.word.Load()); cur == gen && st == HalfOpen {
		b.probes.Add(-1)
	}
}

func (b *Breaker) trip(from uint64, now int64) {
	gen, _ := unpack(from)
	if b.word.CompareAndSwap(from, pack(gen+1, Open)) {
		b.openedAt.Store(now)
		b.trips.Add(1)
	}
}

// record counts one outcome in stripe st's bucket of now.
func (b *Breaker) record(st int, now int64, success bool) {
	epoch := now / b.bucket
	row := b.row(st)
	bk := &row[epoch%int64(len(row))]
	if e := bk.epoch.Load(); e != epoch {
		// The bucket holds an older slot: the first to get here resets it.
		// A count racing the reset may be lost; the window is a measure,
		// not a ledger.
		if bk.epoch.CompareAndSwap(e, epoch) {
			bk.ok.Store(0)
			bk.fail.Store(0)
		}
	}
	if success {
		bk.ok.Add(1)
	} else {
		bk.fail.Add(1)
	}
}

// window sums every row's buckets of the last Window before now.
func (b *Breaker) window(now int64) (ok, fail uint64) {
	epoch := now / b.bucket
	oldest := epoch - int64(b.cfg.Buckets) + 1
	for st := range stripe.N {
		row := b.row(st)
		for i := range row {
			bk := &row[i]
			if e := bk.epoch.Load(); e >= oldest && e <= epoch {
				ok += uint64(bk.ok.Load())
				fail += uint64(bk.fail.Load())
			}
		}
	}
	return ok, fail
}

func (b *Breaker) shouldTrip(now int64) bool {
	ok, fail := b.window(now)
	total := ok + fail
	return total >= uint64(b.cfg.MinRequests) && float64(fail) > b.cfg.FailureRate*float64(total)
}

func (b *Breaker) resetWindow() {
	for i := range b.buckets {
		bk := &b.buckets[i]
		bk.epoch.Store(-1 << 62)
		bk.ok.Store(0)
		bk.fail.Store(0)
	}
}

// ForceOpen opens the breaker by hand (an operator); it closes again only
// through ForceClose or the usual half-open probes after OpenFor.
func (b *Breaker) ForceOpen() {
	for {
		w := b.word.Load()
		gen, _ := unpack(w)
		if b.word.CompareAndSwap(w, pack(gen+1, Open)) {
			b.openedAt.Store(b.now().UnixNano())
			return
		}
	}
}

// ForceClose closes the breaker by hand, with an empty window.
func (b *Breaker) ForceClose() {
	for {
		w := b.word.Load()
		gen, _ := unpack(w)
		if b.word.CompareAndSwap(w, pack(gen+1, Closed)) {
			b.resetWindow()
			return
		}
	}
}

// Status is a breaker's state for operators.
type Status struct {
	State       string    `json:"state"`
	Requests    uint64    `json:"window_requests"`
	FailureRate float64   `json:"window_failure_rate"`
	Trips       uint64    `json:"trips"`
	OpenUntil   time.Time `json:"open_until,omitzero"`
}

// Status reports the breaker's state and window.
func (b *Breaker) Status() Status {
	now := b.now()
	_, st := unpack(b.word.Load())
	ok, fail := b.window(now.UnixNano())
	s := Status{State: st.String(), Requests: ok + fail, Trips: b.trips.Load()}
	if ok+fail > 0 {
		s.FailureRate = float64(fail) / float64(ok+fail)
	}
	if st == Open {
		s.OpenUntil = time.Unix(0, b.openedAt.Load()+int64(b.cfg.OpenFor))
	}
	return s
}

// State reports the current state.
func (b *Breaker) State() State {
	_, st := unpack(b.word.Load())
	return st
}
