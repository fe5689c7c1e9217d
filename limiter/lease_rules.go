package limiter

import (
	"math"
	"sync"
)

// leaseRules is the cluster state of one rule: its entries by key.
type leaseRules struct {
	base   Limit
	prefix string // Redis key before the tag: "tollgate:rl:<id>:"
	mgr    *manager
	shards [tableShards]leaseShard
	perMax int
}

type leaseShard struct {
	mu sync.RWMutex
	m  map[uint64]*entry
	_  [64]byte
}

func newLeaseRules(mgr *manager, base Limit, prefix string, maxKeys int) *leaseRules {
	lr := &leaseRules{base: base, prefix: prefix, mgr: mgr, perMax: max(1, (maxKeys+tableShards-1)/tableShards)}
	for i := range lr.shards {
		lr.shards[i].m = map[uint64]*entry{}
	}
	return lr
}

// get returns key k's entry, nil when this node has none yet.
func (lr *leaseRules) get(k uint64) *entry {
	s := &lr.shards[k&(tableShards-1)]
	s.mu.RLock()
	e := s.m[k]
	s.mu.RUnlock()
	return e
}

// create returns key k's entry, making it (Redis key from value, scale)
// when this node has none. A full shard evicts one entry first, giving
// its tokens back.
func (lr *leaseRules) create(k uint64, value string, scale float64) *entry {
	s := &lr.shards[k&(tableShards-1)]
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.m[k]; e != nil {
		return e
	}
	if len(s.m) >= lr.perMax {
		lr.evict(s)
	}
	e := &entry{key: lr.prefix + "{" + value + "}", rule: lr}
	e.scale.Store(math.Float64bits(scale))
	// A key's first lease is small: most keys of a busy rule are seen a
	// few times; a hot one grows its lease with its measured rate.
	e.want.Store(min(lr.mgr.maxLease(e.limit()), firstLease))
	s.m[k] = e
	return e
}

// evict drops one entry of the full shard s: among a few, the first not
// used since the last pass, else one used, else one under reject_for.
func (lr *leaseRules) evict(s *leaseShard) {
	now := lr.mgr.now().UnixNano()
	var victim, used, blocked *entry
	var victimK, usedK, blockedK uint64
	n := 0
	for k, e := range s.m {
		if n++; n > evictScan {
			break
		}
		switch {
		case e.until.Load() > now:
			if blocked == nil {
				blocked, blockedK = e, k
			}
		case e.ref.Swap(false):
			if used == nil {
				used, usedK = e, k
			}
		default:
			victim, victimK = e, k
		}
		if victim != nil {
			break
		}
	}
	switch {
	case victim != nil:
	case used != nil:
		victim, victimK = used, usedK
	case blocked != nil:
		victim, victimK = blocked, blockedK
	default:
		return
	}
	delete(s.m, victimK)
	lr.mgr.evictions.Add(1)
	lr.mgr.drop(victim)
}

func (lr *leaseRules) each(f func(k uint64, e *entry)) {
	for i := range lr.shards {
		s := &lr.shards[i]
		s.mu.RLock()
		for k, e := range s.m {
			f(k, e)
		}
		s.mu.RUnlock()
	}
}

func (lr *leaseRules) forget(k uint64, e *entry) {
	s := &lr.shards[k&(tableShards-1)]
	s.mu.Lock()
	if s.m[k] == e {
		delete(s.m, k)
		e.dead.Store(true)
	}
	s.mu.Unlock()
}

// keys counts the entries held.
func (lr *leaseRules) keys() int {
	n := 0
	for i := range lr.shards {
		s := &lr.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}

// leaseStats are a cluster rule's figures on this node.
type leaseStats struct {
	Keys     int
	Held     int64 // leased tokens not spent
	Debt     int64
	LeaseAvg float64 // mean current lease size
}

func (lr *leaseRules) stats() leaseStats {
	var st leaseStats
	var want int64
	lr.each(func(_ uint64, e *entry) {
		st.Keys++
		st.Held += max(0, e.pool.Load())
		st.Debt += e.debt.Load()
		want += e.want.Load()
	})
	if st.Keys > 0 {
		st.LeaseAvg = float64(want) / float64(st.Keys)
	}
	return st
}
