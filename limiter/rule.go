package limiter

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/cluster"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/source"
)

// rule is one compiled entry of a limits list. It is immutable; its
// counters live in state objects that outlive reloads.
type rule struct {
	*spec
	route  string
	nodes  cluster.Nodes
	quotas *Quotas
	hash   hasher
	local  *table      // local counters (and cluster rules without Redis)
	lease  *leaseRules // cluster rules with Redis
	mgr    *manager
	counts *counters

	refusal   *pipeline.Canned            // rules with a fixed rate
	byTier    map[string]*pipeline.Canned // tier quotas: by tier name
	challenge *pipeline.Static
	decision  string // the access log's decision for a challenge
}

// counters are a rule's figures on this node since it was created (they
// survive reloads that leave the rule unchanged).
type counters struct {
	allowed, refused, blocked, missing, fallback, delayed atomic.Uint64
}

// outcome is what a rule decided for one request.
type outcome struct {
	ok        bool
	blocked   bool    // refused under reject_for
	limit     float64 // the limit in force (X-RateLimit-Limit)
	remaining int64
	reset     int64 // ns
	retry     int64 // ns
	delay     int64 // ns (leaky bucket)
	tier      string
	tk        taken
}

// taken says how an admission was recorded, so it can be undone when a
// later rule of the same request refuses.
type taken struct {
	how uint8
	k   uint64 // the local key; a leaky slot's time (tookSlot)
	e   *entry
}

const (
	tookNothing uint8 = iota
	tookLocal
	tookPool
	tookDebt
	tookFallback
	tookSlot
)

// key finds the request's counter key for r, and its value bytes (nil for
// the route and for a missing value).
func (r *rule) key(c *pipeline.Ctx, rd *source.Reader) (k uint64, v []byte, missing bool) {
	if r.dim.kind == dimRoute {
		return 1, nil, false
	}
	v, ok := r.dim.value(c, rd)
	if !ok {
		return keyOf(r.hash.missing()), nil, true
	}
	return keyOf(r.hash.sum(v)), v, false
}

// limitFor returns the limit in force for c (a tier quota depends on the
// consumer; dst holds it) and its scale of the base limit; ok is false
// for a consumer whose quota is zero (every request refused).
func (r *rule) limitFor(c *pipeline.Ctx, dst *Limit) (lim *Limit, scale float64, tier string, ok bool) {
	if !r.tier {
		return &r.base, 1, "", true
	}
	q, known := r.quotas.Consumers[c.Consumer]
	if !known {
		q = pipeline.Quota{Tier: "free", QPS: r.quotas.Tiers["free"]}
	}
	scale = float64(q.QPS)
	if r.share > 0 {
		scale *= r.share
	}
	if !(scale > 0) {
		return &r.base, 0, q.Tier, false
	}
	*dst = r.base.Scale(scale)
	return dst, scale, q.Tier, true
}

// take decides one request at now, records an admission, and describes
// the decision in o (zeroed by the caller).
func (r *rule) take(c *pipeline.Ctx, rd *source.Reader, now int64, o *outcome) {
	k, v, missing := r.key(c, rd)
	if missing {
		r.counts.missing.Add(1)
	}
	var buf Limit
	lim, scale, tier, ok := r.limitFor(c, &buf)
	o.tier = tier
	if !ok {
		o.retry, o.reset = int64(time.Second), int64(time.Second)
		return
	}
	o.limit = lim.Rate()
	if r.lease != nil {
		r.takeLease(k, v, missing, lim, scale, now, o)
		return
	}
	split := lim.Split(r.nodes.LiveNodes())
	s, sl, _ := r.local.lock(k, now)
	if sl.until > now {
		o.blocked, o.retry, o.reset = true, sl.until-now, sl.until-now
		s.mu.Unlock()
		return
	}
	d := split.Take(&sl.st, now)
	if !d.OK && r.rejectFor > 0 {
		sl.until = now + r.rejectFor
		d.RetryAfter = max(d.RetryAfter, r.rejectFor)
	}
	s.mu.Unlock()
	o.ok, o.remaining, o.reset, o.retry, o.delay = d.OK, d.Remaining, d.Reset, d.RetryAfter, d.Delay
	o.tk = taken{how: tookLocal, k: k}
}

// takeLease decides a request of a cluster rule: from the node's leased
// tokens, lock-free; ahead of a lease on its way (bounded debt); or, while
// Redis is unavailable, from the key's local fallback counter at the
// node's share.
func (r *rule) takeLease(k uint64, v []byte, missing bool, lim *Limit, scale float64, now int64, o *outcome) {
	e := r.lease.get(k)
	if e == nil {
		e = r.lease.create(k, r.redisValue(v, missing), scale)
	} else if bits := math.Float64bits(scale); e.scale.Load() != bits {
		e.scale.Store(bits) // the consumer's quota changed with a reload
	}
	if !e.ref.Load() {
		e.ref.Store(true)
	}
	if u := e.until.Load(); u > now {
		o.blocked, o.retry, o.reset = true, u-now, u-now
		return
	}
	if r.rejectFor > 0 {
		if u := r.mgr.blockedUntil(e.key); u > now { // tripped on another node
			e.until.Store(u)
			o.blocked, o.retry, o.reset = true, u-now, u-now
			return
		}
	}
	if lim.Alg == LeakyBucket {
		if r.takeSlot(e, lim, now, o) {
			return
		}
	} else if p := e.pool.Add(-1); p >= 0 {
		e.uses.Add(1)
		if p <= e.want.Load()/2 && now >= e.noneUntil.Load() {
			r.mgr.enqueue(e) // refill before it runs out, unless Redis said to wait
		}
		o.ok, o.remaining, o.tk = true, p+max(0, e.level.Load()), taken{how: tookPool, e: e}
		o.reset = r.resetOf(lim, o.remaining)
		return
	} else {
		e.pool.Add(1)
	}
	if !r.mgr.clusterOK(now) {
		r.takeFallback(e, lim, now, o)
		return
	}
	if nu := e.noneUntil.Load(); now < nu {
		o.retry = nu - now
	} else if d := e.debt.Add(1); d <= r.debtMax(e, lim) {
		e.uses.Add(1)
		r.mgr.enqueue(e)
		o.ok, o.tk = true, taken{how: tookDebt, e: e}
		o.reset = r.resetOf(lim, 0)
		return
	} else {
		e.debt.Add(-1)
		r.mgr.enqueue(e)
		o.retry = lim.Interval
		if lim.Alg.windowed() {
			o.retry = max(1, int64(float64(lim.Window)/lim.Count))
		}
	}
	e.misses.Add(1)
	if r.rejectFor > 0 {
		e.until.Store(now + r.rejectFor)
		o.retry = max(o.retry, r.rejectFor)
		r.mgr.shareBlock(e.key, time.Duration(r.rejectFor))
	}
	o.reset = r.resetOf(lim, 0)
}

// debtMax is how many requests a node admits ahead of a lease on its way:
// up to a lease's worth, but one for a leaky bucket, whose requests are
// released at once then and would clump.
func (r *rule) debtMax(e *entry, lim *Limit) int64 {
	if lim.Alg == LeakyBucket {
		return 1
	}
	return max(1, e.want.Load())
}

// takeSlot admits a request of a cluster leaky bucket on the next slot
// the node leased, held until the slot's time; false when it holds none.
// The slots are the cluster's one schedule, so whichever node releases
// which request, the cluster leaks at the constant rate.
func (r *rule) takeSlot(e *entry, lim *Limit, now int64, o *outcome) bool {
	e.mu.Lock()
	at, ok := e.nextSlot(lim.Interval, slotGrace, now)
	release := max(at, now)
	left := e.runs[0].n + e.runs[1].n
	e.mu.Unlock()
	if !ok {
		return false
	}
	e.uses.Add(1)
	if left <= e.want.Load()/2 && now >= e.noneUntil.Load() {
		r.mgr.enqueue(e)
	}
	// Redis grants no slot beyond max_delay of its own now; the bound only
	// absorbs the estimate of that now (half a round trip).
	delay := min(release-now, lim.MaxDelay)
	o.ok, o.delay, o.tk = true, delay, taken{how: tookSlot, e: e, k: uint64(at)}
	o.remaining = (lim.MaxDelay - delay) / lim.Interval
	o.reset = delay + lim.Interval
	return true
}

// takeFallback decides on the key's local counter at the node's share.
func (r *rule) takeFallback(e *entry, lim *Limit, now int64, o *outcome) {
	n := r.nodes.LiveNodes()
	split := lim.Split(n)
	e.mu.Lock()
	chargeShadow(e, split, now)
	d := split.Take(&e.fb, now)
	e.fellBack, e.fbNodes = true, n
	if d.OK {
		e.fbOwn++
	}
	if !d.OK && r.rejectFor > 0 {
		e.until.Store(now + r.rejectFor)
		d.RetryAfter = max(d.RetryAfter, r.rejectFor)
	}
	e.mu.Unlock()
	r.counts.fallback.Add(1)
	o.ok, o.remaining, o.reset, o.retry, o.delay = d.OK, d.Remaining, d.Reset, d.RetryAfter, d.Delay
	o.tk = taken{how: tookFallback, e: e}
}

// resetOf estimates how long until a cluster counter with remaining
// tokens left is full again.
func (r *rule) resetOf(lim *Limit, remaining int64) int64 {
	if lim.Alg.windowed() {
		return lim.Window
	}
	burst := lim.Burst()
	if missing := burst - float64(remaining); missing > 0 {
		return int64(missing * float64(lim.Interval))
	}
	return 0
}

// give undoes an admission (a later rule refused the request).
func (r *rule) give(c *pipeline.Ctx, t *taken, now int64) {
	switch t.how {
	case tookLocal, tookFallback:
		var buf Limit
		lim, _, _, _ := r.limitFor(c, &buf)
		split := lim.Split(r.nodes.LiveNodes())
		if t.how == tookFallback {
			t.e.mu.Lock()
			split.Give(&t.e.fb, now)
			t.e.fbOwn = max(0, t.e.fbOwn-1)
			t.e.mu.Unlock()
			return
		}
		s, sl := r.local.peek(t.k)
		if sl != nil {
			split.Give(&sl.st, now)
		}
		s.mu.Unlock()
	case tookPool:
		t.e.pool.Add(1)
		t.e.uses.Add(-1)
	case tookDebt:
		t.e.debt.Add(-1)
		t.e.uses.Add(-1)
	case tookSlot:
		var buf Limit
		lim, _, _, _ := r.limitFor(c, &buf)
		t.e.giveSlot(int64(t.k), lim.Interval)
		t.e.uses.Add(-1)
	}
}

// peek reports the request's counter without recording anything (the
// headers of an admitted answer).
func (r *rule) peek(c *pipeline.Ctx, rd *source.Reader, now int64) (limit float64, remaining, reset int64) {
	k, _, _ := r.key(c, rd)
	var buf Limit
	lim, _, _, ok := r.limitFor(c, &buf)
	if !ok {
		return 0, 0, 0
	}
	if r.lease != nil {
		e := r.lease.get(k)
		if e == nil {
			return lim.Rate(), int64(lim.Burst()), 0
		}
		remaining = max(0, e.pool.Load()) + max(0, e.level.Load())
		return lim.Rate(), remaining, r.resetOf(lim, remaining)
	}
	split := lim.Split(r.nodes.LiveNodes())
	s, sl := r.local.peek(k)
	if sl == nil {
		s.mu.Unlock()
		st := State{}
		remaining, reset = split.Peek(&st, now)
		return lim.Rate(), remaining, reset
	}
	remaining, reset = split.Peek(&sl.st, now)
	s.mu.Unlock()
	return lim.Rate(), remaining, reset
}

// redisValue is the value part of the key's Redis key.
func (r *rule) redisValue(v []byte, missing bool) string {
	if r.dim.kind == dimRoute {
		return "route"
	}
	return redisValue(v, missing)
}

// mode says how the rule decides now, for reports.
func (r *rule) mode() string {
	switch {
	case r.scope == Local:
		return "local"
	case r.lease == nil:
		return "local (no redis)"
	case r.mgr.inCluster.Load():
		return "cluster"
	}
	return "local fallback"
}
