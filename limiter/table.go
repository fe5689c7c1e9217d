package limiter

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// table holds the counters of one local rule: one slot per key, in shards
// of open-addressing hash tables with a fixed-size slot, so a counter costs
// the same whatever its key (an IP, a 64 KiB JSON value): keys are kept as
// seeded 64-bit hashes, never as bytes.
//
// Memory is bounded: each shard holds at most maxKeys/shards keys. A shard
// allocates its slots on first use and doubles them as it fills (at 7/8),
// up to the size its share of maxKeys needs. When a full shard meets a new
// key it evicts one (CLOCK, second chance): a key that is as good as fresh
// goes first; a key used since the hand last passed keeps its place once
// more, so a hot key outlives any flood of one-off keys; a key under
// reject_for is skipped while others can go. Each slot is 32 bytes, so a
// key costs 32 / load bytes: 36.6 at a full shard (7/8), 73 at worst right
// after a doubling, 91 right after the last growth (see grow).
//
// It is safe for concurrent use; the critical section is a probe and an
// update under the shard's lock.
type table struct {
	shards  [tableShards]shard
	perMax  int // keys per shard
	slotMax int // slots per shard at most
	alg     Algorithm
	window  int64 // ns, window algorithms
}

const (
	tableShards = 64
	// initialSlots is a shard's first allocation.
	initialSlots = 16
	// evictScan bounds the slots the CLOCK hand looks at for one eviction.
	evictScan = 64
	// refBit marks a slot used since the hand last passed; keys are 63-bit.
	refBit = 1 << 63
)

// slot is one key's counter: 32 bytes.
type slot struct {
	key   uint64 // hash | refBit when referenced; 0 = empty
	st    State
	until int64 // unix ns until which the key is refused (reject_for)
}

type shard struct {
	mu    sync.Mutex
	slots []slot
	n     int // keys held
	hand  int
	// evictions counts keys evicted to make room; active those that were
	// not as good as fresh (their limit restarted).
	evictions, active atomic.Uint64
	_                 [64]byte // keep shards on separate cache lines
}

// newTable returns an empty table for at most maxKeys keys (at least
// one per shard).
func newTable(maxKeys int, alg Algorithm, window int64) *table {
	t := &table{alg: alg, window: window}
	t.perMax = max(1, (maxKeys+tableShards-1)/tableShards)
	t.slotMax = t.perMax + t.perMax/7 + 1 // load 7/8 when full
	return t
}

// keyOf makes a hash usable as a slot key: 63 bits, never 0.
func keyOf(h uint64) uint64 {
	h &^= refBit
	if h == 0 {
		h = 1
	}
	return h
}

func (t *table) shard(k uint64) *shard { return &t.shards[k&(tableShards-1)] }

// home is a key's first slot in a table of n slots (multiply-high: the
// shard index uses the low bits, this the high ones).
func home(k uint64, n int) int {
	hi, _ := bits.Mul64(k<<1, uint64(n))
	return int(hi)
}

// lock finds (or makes room for and inserts) key k at now and returns its
// slot with the shard locked; the caller calls s.mu.Unlock when done with
// it. created reports a new, zero slot.
func (t *table) lock(k uint64, now int64) (s *shard, sl *slot, created bool) {
	s = t.shard(k)
	s.mu.Lock()
	for {
		n := len(s.slots)
		if n == 0 {
			s.slots = make([]slot, min(initialSlots, t.slotMax))
			continue
		}
		i := home(k, n)
		for {
			sk := s.slots[i].key
			if sk == 0 {
				break
			}
			if sk&^refBit == k {
				s.slots[i].key = k | refBit
				return s, &s.slots[i], false
			}
			if i++; i == n {
				i = 0
			}
		}
		switch {
		case s.n >= t.perMax:
			t.evict(s, now)
			continue // the probe sequence may have moved
		case (s.n+1)*8 > n*7 && n < t.slotMax:
			t.grow(s)
			continue
		}
		s.slots[i] = slot{key: k | refBit}
		s.n++
		return s, &s.slots[i], true
	}
}

// peek returns key k's slot with the shard locked, or nil (shard still
// locked) when the table does not hold it; it records no use.
func (t *table) peek(k uint64) (s *shard, sl *slot) {
	s = t.shard(k)
	s.mu.Lock()
	n := len(s.slots)
	if n == 0 {
		return s, nil
	}
	for i := home(k, n); ; {
		sk := s.slots[i].key
		if sk == 0 {
			return s, nil
		}
		if sk&^refBit == k {
			return s, &s.slots[i]
		}
		if i++; i == n {
			i = 0
		}
	}
}

// grow doubles the shard's slots (up to slotMax) and reinserts its keys.
// When what would be left to grow after the doubling is under a quarter of
// it, it goes to slotMax at once: a last small step would copy the whole
// shard again for a few more keys, and the old slots, waiting for the
// collector, would double the memory the table holds just as it fills
// (with a million keys: 33 MiB more, briefly, on 36).
func (t *table) grow(s *shard) {
	old := s.slots
	n := min(2*len(old), t.slotMax)
	if t.slotMax-n < n/4 {
		n = t.slotMax
	}
	s.slots = make([]slot, n)
	for _, sl := range old {
		if sl.key == 0 {
			continue
		}
		i := home(sl.key&^refBit, n)
		for s.slots[i].key != 0 {
			if i++; i == n {
				i = 0
			}
		}
		s.slots[i] = sl
	}
	if s.hand >= n {
		s.hand = 0
	}
}

// idle reports a slot as good as fresh.
func (t *table) idle(sl *slot, now int64) bool {
	if sl.until > now {
		return false
	}
	switch t.alg {
	case TokenBucket, LeakyBucket:
		return sl.st.A <= now
	case FixedWindow:
		return sl.st.B == 0 || sl.st.A < now/t.window
	default:
		return sl.st.B == 0 || sl.st.A < now/t.window-1
	}
}

// evict removes one key from the full shard s (see table).
func (t *table) evict(s *shard, now int64) {
	n := len(s.slots)
	victim, fallback := -1, -1
	for range evictScan {
		i := s.hand
		if s.hand++; s.hand == n {
			s.hand = 0
		}
		sl := &s.slots[i]
		if sl.key == 0 {
			continue
		}
		if t.idle(sl, now) {
			victim = i
			break
		}
		if sl.until > now { // under reject_for: the last to go
			if fallback < 0 {
				fallback = i
			}
			continue
		}
		if sl.key&refBit != 0 {
			sl.key &^= refBit
			continue
		}
		victim = i
		break
	}
	if victim < 0 {
		victim = fallback
	}
	if victim < 0 { // every slot looked at was referenced: take the hand's
		for s.slots[s.hand].key == 0 {
			if s.hand++; s.hand == n {
				s.hand = 0
			}
		}
		victim = s.hand
	}
	if !t.idle(&s.slots[victim], now) {
		s.active.Add(1)
	}
	s.evictions.Add(1)
	t.remove(s, victim)
}

// remove deletes slot i by backward-shift deletion (no tombstones).
func (t *table) remove(s *shard, i int) {
	n := len(s.slots)
	j := i
	for {
		if j++; j == n {
			j = 0
		}
		if s.slots[j].key == 0 {
			break
		}
		h := home(s.slots[j].key&^refBit, n)
		// Slot j stays if its home lies cyclically in (i, j].
		if i <= j {
			if i < h && h <= j {
				continue
			}
		} else if i < h || h <= j {
			continue
		}
		s.slots[i] = s.slots[j]
		i = j
	}
	s.slots[i] = slot{}
	s.n--
}

// tableStats are a table's figures for the admin view.
type tableStats struct {
	Keys, Slots            int
	Evictions, ActiveEvict uint64
}

func (t *table) stats() tableStats {
	var st tableStats
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		st.Keys += s.n
		st.Slots += len(s.slots)
		s.mu.Unlock()
		st.Evictions += s.evictions.Load()
		st.ActiveEvict += s.active.Load()
	}
	return st
}

// keys counts the keys held (cheap: one lock per shard).
func (t *table) keys() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += s.n
		s.mu.Unlock()
	}
	return n
}
