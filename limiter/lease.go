package limiter

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/cluster"
	"go.uber.org/zap"
)

// Leaser is what the lease worker needs of Redis: redisLeaser, the lease
// protocol on the node's *cluster.Client (tests: a fake).
type Leaser interface {
	// Lease runs a batch of lease requests (background only; may block
	// up to timeout and, on a silent server, somewhat more).
	Lease(timeout time.Duration, reqs []LeaseRequest, out []LeaseResult) error
	// Healthy reports that Redis answered recently.
	Healthy() bool
}

// BlockedKey is the Redis set (see cluster.SetView) through which nodes
// share the keys of cluster rules under reject_for: members are the keys'
// Redis keys, scores when their block ends.
const BlockedKey = "tollgate:rl:blocked"

// blockSharer is what sharing reject_for blocks needs: *cluster.Client.
type blockSharer interface {
	WatchSet(key string, refresh time.Duration) *cluster.SetView
	AddToSet(key, member string, ttl time.Duration) error
}

// block is a trip to announce to the other nodes.
type block struct {
	member string
	ttl    time.Duration
}

// Lease tuning. See the package documentation for what they bound.
const (
	// leaseSpan is how long a lease should last a node at its current
	// rate; it also caps a lease at leaseSpan of the node's fair share
	// of the rate (maxLease).
	leaseSpan = 100 * time.Millisecond
	// stallAfter: a lease call unanswered this long puts cluster rules
	// in local fallback until Redis answers (rueidis can hold a call for
	// about a second against a hung server).
	stallAfter = 50 * time.Millisecond
	// leaseTimeout bounds one lease call.
	leaseTimeout = 500 * time.Millisecond
	// tickEvery paces the worker's housekeeping; sweepEvery the pass over
	// every entry (shadow counters, idle tokens given back).
	tickEvery  = 10 * time.Millisecond
	sweepEvery = 100 * time.Millisecond
	// idleGiveBack: tokens of a key unused this long go back to Redis.
	idleGiveBack = 500 * time.Millisecond
	// idleForget: a key unused this long (and as good as fresh) is
	// dropped from the node.
	idleForget = 60 * time.Second
	// minWait is the least a node waits before asking again for a
	// counter Redis had nothing left of.
	minWait = 2 * time.Millisecond
	maxWait = 2 * time.Second
	// firstLease is the most a key's first lease asks for.
	firstLease = 16
	// queueSize bounds the keys waiting for the worker.
	queueSize = 4096
	// blockQueue bounds the reject_for trips waiting to be announced;
	// past it (an abuse wave) a trip holds on the node that saw it only.
	blockQueue = 1024
	// batchMax bounds one lease call.
	batchMax = 512
)

// manager is the node's lease worker: one goroutine that asks Redis for
// tokens in batches, gives back what idle keys hold, keeps fallback
// counters current, and decides (with the Redis client's health) whether
// cluster rules run on leases or on the local split. It is shared by
// every cluster rule and survives reloads.
type manager struct {
	leaser Leaser
	nodes  cluster.Nodes
	now    func() time.Time
	log    *zap.Logger

	queue     chan *entry
	busySince atomic.Int64 // unix ns a lease call began; 0 when none is running

	// blocked is every node's reject_for blocks (nil without a Redis
	// client that can share them); blocks queues this node's trips.
	blocked *cluster.SetView
	sharer  blockSharer
	blocks  chan block
	shared  atomic.Uint64

	mu    sync.Mutex
	rules map[*leaseRules]struct{}

	// figures
	calls, granted, errors, evictions atomic.Uint64
	fallbacks, recoveries             atomic.Uint64
	inCluster                         atomic.Bool // the worker's last view, for reports

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	started  bool
	wg       sync.WaitGroup

	// worker
	lastSweep int64
	wasOK     bool
	reqs      []LeaseRequest
	outs      []LeaseResult
	batch     []*entry
	backs     []LeaseRequest
	lastErr   string
}

func newManager(l Leaser, nodes cluster.Nodes, now func() time.Time, log *zap.Logger) *manager {
	if log == nil {
		log = zap.NewNop()
	}
	m := &manager{leaser: l, nodes: nodes, now: now, log: log, queue: make(chan *entry, queueSize),
		rules: map[*leaseRules]struct{}{}, stop: make(chan struct{}), done: make(chan struct{}), wasOK: true}
	m.inCluster.Store(true)
	if bs, ok := l.(blockSharer); ok {
		m.sharer, m.blocks = bs, make(chan block, blockQueue)
		m.blocked = bs.WatchSet(BlockedKey, 0)
	}
	return m
}

// shareBlock announces that member is refused for ttl (reject_for) to
// the other nodes, from a background goroutine. It never blocks.
func (m *manager) shareBlock(member string, ttl time.Duration) {
	if m.blocks == nil {
		return
	}
	select {
	case m.blocks <- block{member, ttl}:
	default:
	}
}

// blockedUntil reports when another node's block of member ends (unix
// ns), 0 when there is none. Lock-free.
func (m *manager) blockedUntil(member string) int64 {
	if m.blocked == nil {
		return 0
	}
	if exp, ok := m.blocked.Expiry(member); ok {
		return exp * int64(time.Millisecond)
	}
	return 0
}

func (m *manager) publish() {
	defer m.wg.Done()
	for {
		select {
		case <-m.stop:
			return
		case b := <-m.blocks:
			if m.leaser.Healthy() && m.sharer.AddToSet(BlockedKey, b.member, b.ttl) == nil {
				m.shared.Add(1)
			}
		}
	}
}

// start runs the worker until close.
func (m *manager) start() {
	m.started = true
	go m.run()
	if m.blocks != nil {
		m.wg.Add(1)
		go m.publish()
	}
}

func (m *manager) close() {
	m.stopOnce.Do(func() {
		close(m.stop)
		if m.started {
			<-m.done
		}
		m.wg.Wait()
	})
}

func (m *manager) register(lr *leaseRules) {
	m.mu.Lock()
	m.rules[lr] = struct{}{}
	m.mu.Unlock()
}

// unregister forgets a rule no snapshot uses any more; its tokens go back.
func (m *manager) unregister(lr *leaseRules) {
	m.mu.Lock()
	delete(m.rules, lr)
	m.mu.Unlock()
	lr.each(func(_ uint64, e *entry) { m.drop(e) })
}

// clusterOK reports whether cluster rules decide on leases: Redis is
// healthy and no lease call has hung for stallAfter. Lock-free.
func (m *manager) clusterOK(now int64) bool {
	if !m.leaser.Healthy() {
		return false
	}
	bs := m.busySince.Load()
	return bs == 0 || now-bs < int64(stallAfter)
}

// enqueue hands e to the worker unless it is already waiting. It never
// blocks: with the queue full, a later request asks again.
func (m *manager) enqueue(e *entry) {
	if e.queued.Load() || !e.queued.CompareAndSwap(false, true) {
		return
	}
	select {
	case m.queue <- e:
	default:
		e.queued.Store(false)
	}
}

// drop retires an evicted or forgotten entry: what it holds goes back to
// Redis on the worker's next call (best effort).
func (m *manager) drop(e *entry) {
	e.dead.Store(true)
	m.enqueue(e)
}

// maxLease caps a lease: leaseSpan of the node's fair share of the rate,
// at least one token.
func (m *manager) maxLease(l Limit) int64 {
	perSec := l.Rate() / (float64(l.Window) / float64(time.Second))
	n := float64(m.nodes.LiveNodes())
	return max(1, int64(perSec*leaseSpan.Seconds()/n))
}

func (m *manager) run() {
	defer close(m.done)
	t := time.NewTicker(tickEvery)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case e := <-m.queue:
			m.batch = append(m.batch, e)
		case <-t.C:
		}
		m.step()
	}
}

// step is one turn of the worker: it drains the queue, sweeps when due,
// and makes at most one lease call. Tests drive it directly.
func (m *manager) step() {
	for len(m.batch) < batchMax {
		select {
		case e := <-m.queue:
			m.batch = append(m.batch, e)
			continue
		default:
		}
		break
	}
	now := m.now().UnixNano()
	ok := m.clusterOK(now)
	if ok != m.wasOK {
		m.wasOK = ok
		m.inCluster.Store(ok)
		if ok {
			m.recoveries.Add(1)
			m.log.Info("cluster limits are back on Redis token leases")
		} else {
			m.fallbacks.Add(1)
			m.log.Warn("cluster limits fall back to local buckets at limit ÷ live nodes: Redis is unavailable or not answering",
				zap.Int("live_nodes", m.nodes.LiveNodes()))
		}
	}
	if now-m.lastSweep >= int64(sweepEvery) {
		m.lastSweep = now
		m.sweep(now)
	}
	if len(m.batch) == 0 && len(m.backs) == 0 {
		return
	}
	if !ok {
		for _, e := range m.batch {
			e.queued.Store(false)
		}
		m.batch = m.batch[:0]
		m.backs = m.backs[:0] // tokens held through an outage are not returned
		return
	}
	m.lease(now)
}

// lease asks for the batch's tokens (and gives back the idle ones) in one
// call, and applies the answers.
func (m *manager) lease(now int64) {
	m.reqs = m.reqs[:0]
	n := m.nodes.LiveNodes()
	for _, e := range m.batch {
		lim := e.limit()
		want := int64(0)
		if !e.dead.Load() {
			want = m.size(e, lim, now)
		}
		spent := e.debt.Swap(0)
		if e.dead.Load() {
			if p := e.pool.Swap(0); p > 0 && lim.Alg == TokenBucket {
				spent -= p
			}
		}
		own, inUse := m.resync(e, lim, n, now)
		r := request(e, lim, want, spent+own)
		if !e.dead.Load() {
			r.InUse = inUse
		}
		m.reqs = append(m.reqs, r)
	}
	m.reqs = append(m.reqs, m.backs...)
	if len(m.outs) < len(m.reqs) {
		m.outs = make([]LeaseResult, len(m.reqs))
	}
	m.busySince.Store(max(now, 1))
	err := m.leaser.Lease(leaseTimeout, m.reqs, m.outs)
	m.busySince.Store(0)
	m.calls.Add(uint64(len(m.reqs)))
	after := m.now().UnixNano()
	rtt := time.Duration(after - now)
	batch := m.batch
	m.batch, m.backs = m.batch[:0], m.backs[:0]
	if err != nil {
		// Whether Redis applied the call is unknown: what the nodes spent
		// ahead of it is kept to be reported again (counting it twice
		// errs on the side of the limit; dropping it would not).
		m.errors.Add(1)
		for i, e := range batch {
			if sp := m.reqs[i].Spent; sp > 0 && !e.dead.Load() {
				e.debt.Add(sp)
			}
			e.queued.Store(false)
		}
		return
	}
	for i, e := range batch {
		out := &m.outs[i]
		e.queued.Store(false)
		if out.Err != nil {
			m.errors.Add(1)
			if msg := out.Err.Error(); msg != m.lastErr {
				m.lastErr = msg
				m.log.Error("lease refused by Redis", zap.String("key", e.key), zap.Error(out.Err))
			}
			continue
		}
		if e.dead.Load() {
			continue
		}
		req := &m.reqs[i]
		m.granted.Add(uint64(out.Granted))
		leaky := req.Alg == LeaseLeakyBucket
		gap := float64(req.Per) / req.Limit
		switch {
		case leaky:
			// Redis's now is taken to be halfway through the call.
			first := now + (after-now)/2 + int64(out.Level*float64(time.Microsecond))
			e.mu.Lock()
			e.addRun(first, out.Granted)
			e.mu.Unlock()
		case req.Alg != LeaseTokenBucket:
			e.windowEnd.Store(after + int64(out.WindowLeft))
			fallthrough
		default:
			e.level.Store(int64(math.Floor(out.Level)))
			e.pool.Add(out.Granted)
		}
		// A bucket left with less than another lease is running at its
		// limit: asking again as soon as half the pool is spent would
		// find little there and get a partial grant, twice the calls for
		// the same tokens. The node comes back when its share of the
		// refill makes up a whole lease, whether this grant was whole or
		// partial.
		// A leaky schedule is as full when the run began less than a
		// lease short of its capacity.
		dry := req.Alg == LeaseTokenBucket && out.Level < float64(req.Want) ||
			leaky && out.Level*float64(time.Microsecond)+float64(req.Want)*gap > (req.Burst-1)*gap
		if out.Granted < req.Want || dry {
			// Redis's wait is until the tokens are there for this node
			// alone; the live nodes share the refill, so each asks about
			// once per lease's worth of the whole rate.
			// A window's end is the same for all. The next call is
			// sent a round trip early, so the wait is not lengthened by
			// the call itself (on a busy host that is what would keep
			// a saturated key below its rate).
			wait := out.Wait
			switch req.Alg {
			case LeaseTokenBucket, LeaseLeakyBucket:
				whole := time.Duration(float64(req.Want) * gap)
				wait = min(max(wait, whole)*time.Duration(n), maxWait) - rtt
			case LeaseSlidingWindow:
				if wait < out.WindowLeft {
					wait = min(wait*time.Duration(n), out.WindowLeft) - rtt
				}
			}
			e.noneUntil.Store(after + int64(max(wait, minWait)))
		} else {
			e.noneUntil.Store(0)
			if e.pool.Load() <= e.want.Load()/2 {
				m.enqueue(e) // spent faster than it came: ask again at once
			}
		}
	}
}

// request builds the lease request of e.
func request(e *entry, lim Limit, want, spent int64) LeaseRequest {
	r := LeaseRequest{Key: e.key, Limit: lim.Rate(), Per: time.Duration(lim.Window), Want: want, Spent: spent}
	switch lim.Alg {
	case FixedWindow:
		r.Alg, r.TTL = LeaseFixedWindow, 2*r.Per
	case SlidingWindow:
		r.Alg, r.TTL = LeaseSlidingWindow, 2*r.Per
	case LeakyBucket:
		r.Alg = LeaseLeakyBucket
		r.Burst = lim.Burst()
		r.TTL = time.Duration(lim.MaxDelay + lim.Interval)
	default:
		r.Alg = LeaseTokenBucket
		r.Burst = lim.Burst()
		r.TTL = time.Duration(lim.Tau) + r.Per
	}
	return r
}

// size decides e's next lease from its recent demand (admissions and
// refusals): enough for leaseSpan, at least one, at most maxLease.
func (m *manager) size(e *entry, lim Limit, now int64) int64 {
	count := e.uses.Load() + e.misses.Load()
	maxL := m.maxLease(lim)
	want := min(maxL, firstLease)
	if e.lastAt != 0 && now > e.lastAt {
		rate := float64(count-e.lastCount) / (float64(now-e.lastAt) / float64(time.Second))
		if e.ewma == 0 {
			e.ewma = rate
		} else {
			e.ewma = 0.5*e.ewma + 0.5*rate
		}
		want = min(maxL, max(1, int64(math.Ceil(e.ewma*leaseSpan.Seconds()))))
	}
	e.lastAt, e.lastCount = now, count
	e.want.Store(want)
	return want
}

// resync returns what the next lease call charges Redis for the node's
// admissions beyond its leases and debt, so that the cluster's counter is
// not found full when it is not.
//
// own is what the node admitted on its fallback counter alone since it
// last fell back: Redis has not seen those, whether or not it kept the
// counter (a slow or frozen Redis keeps it), and every call after a
// fallback charges them. Read at the split the counter decided with.
//
// inUse is what the fallback counter holds in all, the node's leased
// admissions included, at the current split (n live nodes): the counter's
// state to start from when Redis lost it. The script charges it only to a
// counter it found lost (see cluster's leaseSource); charged to one it
// kept, the leased admissions would count twice, and each brief fallback
// of a slow Redis would cost the cluster up to a burst.
//
// Neither is more than the node's share of the burst.
func (m *manager) resync(e *entry, lim Limit, n int, now int64) (own, inUse int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fellBack {
		e.fellBack = false
		own = min(e.fbOwn, e.fbUsed(lim, e.fbNodes, now))
		e.fbOwn = 0
	}
	return own, e.fbUsed(lim, n, now)
}

// fbUsed is what the fallback counter holds, read at the split of n nodes
// once the leased admissions since the last sweep are charged to it, and
// never more than the node's share of the burst. e.mu is held.
func (e *entry) fbUsed(lim Limit, n int, now int64) int64 {
	n = max(1, n)
	split := lim.Split(n)
	chargeShadow(e, split, now)
	return min(split.Used(&e.fb, now), int64(math.Ceil(lim.Burst()/float64(n))))
}

// sweep is the periodic pass over every entry: fallback counters catch up
// with the leased admissions, idle keys give their tokens back, window
// tokens past their window are voided, long-idle keys are forgotten.
func (m *manager) sweep(now int64) {
	m.mu.Lock()
	rules := make([]*leaseRules, 0, len(m.rules))
	for lr := range m.rules {
		rules = append(rules, lr)
	}
	m.mu.Unlock()
	n := m.nodes.LiveNodes()
	var forget []struct {
		lr *leaseRules
		k  uint64
		e  *entry
	}
	for _, lr := range rules {
		lr.each(func(k uint64, e *entry) {
			lim := e.limit()
			split := lim.Split(n)
			e.mu.Lock()
			chargeShadow(e, split, now)
			fbIdle := split.Idle(&e.fb, now)
			if lim.Alg == LeakyBucket {
				e.lapse(lim.Interval, slotGrace, now)
				e.pool.Store(e.runs[0].n + e.runs[1].n)
			}
			e.mu.Unlock()
			count := e.uses.Load() + e.misses.Load()
			if count != e.seenCount || e.idleSince == 0 {
				e.seenCount, e.idleSince = count, now
			}
			idle := now - e.idleSince
			switch {
			case lim.Alg == LeakyBucket:
				// Slots cannot go back: unused, they lapse with time.
			case lim.Alg == FixedWindow:
				if now >= e.windowEnd.Load() && e.pool.Load() > 0 {
					e.pool.Store(0) // a window's tokens are void after it
				}
			case lim.Alg == SlidingWindow:
				// Counted in the window they were leased in: spent a
				// little later they stay within the bound; unused they
				// lapse (giving them back would credit another window).
				if idle >= int64(idleGiveBack) && e.pool.Load() > 0 {
					e.pool.Store(0)
				}
			case idle >= int64(idleGiveBack) && e.pool.Load() > 0 && !e.queued.Load() && len(m.backs) < batchMax:
				if p := e.pool.Swap(0); p > 0 {
					m.backs = append(m.backs, request(e, lim, 0, -p))
				}
			}
			if e.debt.Load() > 0 && !e.queued.Load() {
				m.enqueue(e) // spent ahead of a lease that never came (Redis was away)
			}
			if idle >= int64(idleForget) && fbIdle && e.pool.Load() <= 0 && e.debt.Load() == 0 &&
				e.until.Load() <= now && !e.queued.Load() {
				forget = append(forget, struct {
					lr *leaseRules
					k  uint64
					e  *entry
				}{lr, k, e})
			}
		})
	}
	for _, f := range forget {
		f.lr.forget(f.k, f.e)
	}
}

// chargeShadow charges e's fallback counter with the admissions made on
// leases since the last charge. e.mu is held.
func chargeShadow(e *entry, split Limit, now int64) {
	u := e.uses.Load()
	if d := u - e.fbSeen; d > 0 {
		split.Charge(&e.fb, d, now)
	}
	e.fbSeen = u
}
