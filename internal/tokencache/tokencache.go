// Package tokencache is a bounded, sharded cache of verified tokens (JWTs
// now; API keys and limiter keys next): entries are found by the token's
// 64-bit hash and confirmed by comparing the whole token, so a collision
// is a miss, never a wrong answer. A hit takes one shard's read lock and
// allocates nothing; a full shard evicts CLOCK-style, expired entries
// first.
package tokencache

import (
	"bytes"
	"sync"
	"sync/atomic"
)

// Entry is what the cache holds. Entries are immutable once put (but for
// the reference bit), so readers use them after the shard lock is gone.
type Entry interface {
	// Token is the whole token, compared on every hit.
	Token() []byte
	// Hash is the token's hash (xxhash64 in practice).
	Hash() uint64
	// Expires is when the entry stops being useful (unix ns).
	Expires() int64
	// Ref is the entry's CLOCK reference bit.
	Ref() *atomic.Uint32
}

// Cache is safe for concurrent use.
type Cache[E Entry] struct {
	shards   []shard[E]
	shift    uint // hash >> shift picks the shard
	perShard int
}

type shard[E Entry] struct {
	mu    sync.RWMutex
	index map[uint64]int32 // hash → slot
	slots []E
	hand  int
	_     [64]byte // keep neighbouring shards' locks off one cache line
}

// New returns a cache of about size entries.
func New[E Entry](size int) *Cache[E] {
	n := 64
	for n > 1 && size/n < 16 {
		n /= 2
	}
	shift := uint(64)
	for m := n; m > 1; m >>= 1 {
		shift--
	}
	c := &Cache[E]{shards: make([]shard[E], n), shift: shift, perShard: max(size/n, 1)}
	for i := range c.shards {
		c.shards[i].index = make(map[uint64]int32)
	}
	return c
}

func (c *Cache[E]) shard(h uint64) *shard[E] {
	if c.shift == 64 {
		return &c.shards[0]
	}
	return &c.shards[h>>c.shift]
}

// Get returns the entry for token (whose hash is h), and false when there
// is none.
func (c *Cache[E]) Get(h uint64, token []byte) (E, bool) {
	s := c.shard(h)
	s.mu.RLock()
	var e E
	i, ok := s.index[h]
	if ok {
		e = s.slots[i]
	}
	s.mu.RUnlock()
	if !ok || !bytes.Equal(e.Token(), token) {
		var zero E
		return zero, false
	}
	if r := e.Ref(); r.Load() == 0 {
		r.Store(1)
	}
	return e, true
}

// Put caches e, replacing an entry of the same hash (a collision, or
// another goroutine's verification of the same token). A full shard frees
// the first slot under its hand whose entry has expired (by now) or was
// not used since the hand last passed.
func (c *Cache[E]) Put(e E, now int64) {
	s := c.shard(e.Hash())
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.index[e.Hash()]; ok {
		s.slots[i] = e
		return
	}
	if len(s.slots) < c.perShard {
		s.index[e.Hash()] = int32(len(s.slots))
		s.slots = append(s.slots, e)
		return
	}
	for {
		old := s.slots[s.hand]
		if old.Expires() <= now || old.Ref().Load() == 0 {
			delete(s.index, old.Hash())
			s.slots[s.hand] = e
			s.index[e.Hash()] = int32(s.hand)
			s.hand = (s.hand + 1) % len(s.slots)
			return
		}
		old.Ref().Store(0)
		s.hand = (s.hand + 1) % len(s.slots)
	}
}

// Len reports the number of cached entries.
func (c *Cache[E]) Len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		n += len(s.slots)
		s.mu.RUnlock()
	}
	return n
}

// Cap reports how many entries the cache holds at most.
func (c *Cache[E]) Cap() int { return len(c.shards) * c.perShard }
