package limiter

import (
	"math"
	"sync"
	"sync/atomic"
)

// entry is one key of a cluster rule on this node: the tokens it holds and
// what it spent ahead of them, and its local fallback counter.
//
// The request path touches only atomics unless the rule is in fallback;
// the worker owns the unexported fields below "worker".
type entry struct {
	// pool: leased tokens not spent yet. debt: admitted without a lease
	// while one was on its way, to be deducted by the next lease call.
	pool, debt atomic.Int64
	// uses and misses count admissions and refusals (monotonic).
	uses, misses atomic.Int64
	// want is the current lease size; a refill is asked for when pool
	// falls to want/2.
	want   atomic.Int64
	queued atomic.Bool
	// noneUntil (unix ns): Redis had no tokens left; an empty pool refuses
	// until then. windowEnd: window algorithms' leased tokens are void
	// after it.
	noneUntil, windowEnd atomic.Int64
	// level is what Redis said the counter held after the last grant.
	level atomic.Int64
	// until (unix ns): refused under reject_for.
	until atomic.Int64
	// scale multiplies the rule's base limit for this key (a consumer's
	// quota × share), as float64 bits.
	scale atomic.Uint64
	ref   atomic.Bool // used since the evicting hand last passed
	dead  atomic.Bool // evicted or forgotten: the worker skips it

	// mu guards the fallback counter, which is charged with what the
	// node admitted on leases, so falling back starts from it, and a
	// leaky bucket's slots.
	mu   sync.Mutex
	runs [2]slotRun // leaky bucket: leased slots, earliest first

	fb       State
	fbSeen   int64 // uses already charged to fb
	fellBack bool  // decided by fb since the last lease: resync
	fbOwn    int64 // admitted by fb itself since the last resync
	fbNodes  int   // the node count fb was split by when it last decided

	key  string      // Redis key
	rule *leaseRules // the rule's counters

	// worker
	lastAt    int64
	lastCount int64
	ewma      float64
	idleSince int64
	seenCount int64
}

// slotRun is a run of a cluster leaky bucket's leased slots: n of them,
// the cluster's interval apart, the first at `at` (unix ns).
type slotRun struct{ at, n int64 }

// nextSlot takes the earliest slot the node holds, lapsing those more than
// one interval in the past: the cluster's schedule has moved on from them,
// and releasing a request in one now would crowd a later slot. ok is false
// when none is left. The pool mirrors the count. e.mu is held.
func (e *entry) nextSlot(gap, grace, now int64) (at int64, ok bool) {
	e.lapse(gap, grace, now)
	r := &e.runs[0]
	if r.n == 0 {
		return 0, false
	}
	at = r.at
	r.at += gap
	r.n--
	if r.n == 0 {
		e.runs[0], e.runs[1] = e.runs[1], slotRun{}
	}
	e.pool.Store(e.runs[0].n + e.runs[1].n)
	return at, true
}

// lapse drops the slots older than grace; the pool is the caller's to
// update. e.mu is held.
func (e *entry) lapse(gap, grace, now int64) {
	for e.runs[0].n > 0 {
		r := &e.runs[0]
		late := now - grace - r.at
		if late <= 0 {
			break
		}
		skip := min(r.n, late/gap+1)
		r.at += skip * gap
		r.n -= skip
		if r.n == 0 {
			e.runs[0], e.runs[1] = e.runs[1], slotRun{}
		}
	}
}

// slotGrace is how late a leased slot may still be used. A run has the
// cluster's spacing, but the node's own requests come at about its share
// of the rate, and a lease is sized to last the node leaseSpan at its
// demand: its slots are used within about that, and a slot later than
// that lapses (an idle node's run).
const slotGrace = int64(leaseSpan)

// addRun keeps a newly leased run of slots. Runs never overlap (the
// cluster's schedule hands each slot out once) and a node asks for the
// next run while it still holds half of one, so two runs suffice; should
// a third arrive, the earlier runs' slots are dropped. e.mu is held.
func (e *entry) addRun(at, n int64) {
	switch {
	case n <= 0:
	case e.runs[0].n == 0:
		e.runs[0] = slotRun{at, n}
	case e.runs[1].n == 0:
		e.runs[1] = slotRun{at, n}
	default:
		e.runs[0], e.runs[1] = e.runs[1], slotRun{at, n}
	}
	e.pool.Store(e.runs[0].n + e.runs[1].n)
}

// giveSlot puts back the slot at `at` if it is the last one taken: at the
// head of its run, or as a run of its own when it was its run's last.
func (e *entry) giveSlot(at, gap int64) {
	e.mu.Lock()
	switch r := &e.runs[0]; {
	case r.n > 0 && r.at == at+gap:
		r.at, r.n = at, r.n+1
	case e.runs[1].n == 0 && (r.n == 0 || r.at > at):
		e.runs[1], e.runs[0] = e.runs[0], slotRun{at, 1}
	}
	e.pool.Store(e.runs[0].n + e.runs[1].n)
	e.mu.Unlock()
}

func (e *entry) limit() Limit {
	return e.rule.base.Scale(math.Float64frombits(e.scale.Load()))
}
