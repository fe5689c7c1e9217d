package waf

import (
	"hash/maphash"
	"sync/atomic"

	"github.com/tollgate/tollgate/source"
)

// cleanCache remembers header and cookie values the detectors found
// clean. A browser sends the same User-Agent (and the same cookies) on
// every request, and such a value — spaces, slashes, parentheses — always
// reaches libinjection, which allocates; remembering it keeps the common
// request allocation-free. Entries are 64-bit hashes under a seed chosen
// at start, so a client cannot craft a value that collides with a clean
// one; a slot is simply overwritten by the next value hashing to it.
type cleanCache struct {
	slots [cleanSlots]atomic.Uint64
}

const cleanSlots = 4096

var (
	cleanSeed = maphash.MakeSeed()
	clean     cleanCache
)

// key is the hash of value under the detectors that judged it (a value
// clean for sqli alone is not clean for both); never 0, the empty slot.
func (w *WAF) cleanKey(value []byte) uint64 {
	h := maphash.Bytes(cleanSeed, value)
	if w.sqli {
		h ^= 0x9e3779b97f4a7c15
	}
	if w.xss {
		h ^= 0xc2b2ae3d27d4eb4f
	}
	return h | 1
}

func (c *cleanCache) has(k uint64) bool { return c.slots[k%cleanSlots].Load() == k }
func (c *cleanCache) add(k uint64)      { c.slots[k%cleanSlots].Store(k) }

// checkField is check for a header or cookie value, through the cache.
// Only the detectors' verdict is remembered, never an allow-list's: the
// cache is shared by every route.
func (w *WAF) checkField(k source.Kind, name, value []byte) finding {
	if len(value) == 0 || w.allowed(k, name, value) {
		return none
	}
	if len(value) < minCached {
		return w.inspect(value)
	}
	key := w.cleanKey(value)
	if clean.has(key) {
		return none
	}
	f := w.inspect(value)
	if f == none {
		clean.add(key)
	}
	return f
}

// minCached: shorter values are cheap to check again.
const minCached = 16
