package waf

import (
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// verdictCache remembers the detectors' verdict on values that recur from
// request to request — a browser's User-Agent, a Referer, a consent
// cookie — which reach the detectors (they hold '(' ';' ':') on every
// request, and which the detectors would parse again each time, and
// allocate. One word a slot: the value's 64-bit hash with the verdict in
// its two low bits, written and read atomically, so loops share it
// without a lock. A collision replaces the slot; two values whose hashes
// agree in 62 bits are taken as one (about one chance in 4.6 × 10^18).
type verdictCache struct {
	slots [verdictSlots]atomic.Uint64
}

const verdictSlots = 4096

// inspectCached is w.inspect(value), from the cache when value was seen.
func (w *WAF) inspectCached(value []byte) finding {
	if !maySQLi(value) && !mayXSS(value) {
		return none // plain: nothing to remember (inspect would not decode it either: no '%')
	}
	h := xxhash.Sum64(value)
	slot := &w.cache.slots[h%verdictSlots]
	tag := h &^ 3
	if v := slot.Load(); v != 0 && v&^3 == tag {
		return finding(v&3) - 1
	}
	f := w.inspect(value)
	slot.Store(tag | uint64(f+1))
	return f
}
