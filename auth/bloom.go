package auth

import (
	"math"
	"sync"
	"sync/atomic"
)

// rotatingBloom remembers keys for at least a given span in bounded memory:
// three Bloom filters, each covering half the span; the oldest is cleared
// and reused every half span, so a key added at any moment is in one of
// the live filters for at least the full span. Memory is fixed at build
// time whatever the traffic; above the planned rate only the false
// positive rate rises.
type rotatingBloom struct {
	gens    [3]*bloom
	current atomic.Int32 // index of the generation new keys go to
	// slice is the half span in ns; rotated is the start of the current
	// generation (unix ns).
	slice   int64
	rotated atomic.Int64
	rotMu   sync.Mutex
	// stripes make test-and-add atomic per key (no two claims of one
	// nonce on this node can both see it fresh).
	stripes [256]sync.Mutex
}

// bloom is one filter: m bits, k probes, atomically settable words.
type bloom struct {
	words []atomic.Uint64
	m     uint64
	k     uint32
}

// newRotatingBloom sizes each generation for perSlice keys at false
// positive rate fp.
func newRotatingBloom(span int64, perSlice int, fp float64) *rotatingBloom {
	n := float64(max(perSlice, 1024))
	m := uint64(math.Ceil(-n * math.Log(fp) / (math.Ln2 * math.Ln2)))
	m = (m + 63) &^ 63
	k := uint32(math.Round(float64(m) / n * math.Ln2))
	k = min(max(k, 1), 20)
	rb := &rotatingBloom{slice: span / 2}
	for i := range rb.gens {
		rb.gens[i] = &bloom{words: make([]atomic.Uint64, m/64), m: m, k: k}
	}
	return rb
}

// bytes reports the filters' memory.
func (rb *rotatingBloom) bytes() int { return 3 * len(rb.gens[0].words) * 8 }

// rotate retires the oldest generation when the current one is older than
// half the span. Called on the request path; the clearing (a few MB of
// stores) happens at most once per half span.
func (rb *rotatingBloom) rotate(now int64) {
	start := rb.rotated.Load()
	if start == 0 {
		rb.rotated.CompareAndSwap(0, now)
		return
	}
	if now-start < rb.slice {
		return
	}
	rb.rotMu.Lock()
	defer rb.rotMu.Unlock()
	if start = rb.rotated.Load(); now-start < rb.slice {
		return
	}
	next := (rb.current.Load() + 1) % 3
	rb.gens[next].clear()
	rb.current.Store(next)
	rb.rotated.Store(now)
}

// testAndAdd reports whether h was probably seen within the span, and
// records it in the current generation either way.
func (rb *rotatingBloom) testAndAdd(h1, h2 uint64, now int64) (seen bool) {
	rb.rotate(now)
	mu := &rb.stripes[h1&255]
	mu.Lock()
	for _, g := range rb.gens {
		if g.has(h1, h2) {
			seen = true
			break
		}
	}
	rb.gens[rb.current.Load()].add(h1, h2)
	mu.Unlock()
	return seen
}

func (b *bloom) has(h1, h2 uint64) bool {
	for i := uint32(0); i < b.k; i++ {
		bit := (h1 + uint64(i)*h2) % b.m
		if b.words[bit/64].Load()&(1<<(bit%64)) == 0 {
			return false
		}
	}
	return true
}

func (b *bloom) add(h1, h2 uint64) {
	for i := uint32(0); i < b.k; i++ {
		bit := (h1 + uint64(i)*h2) % b.m
		b.words[bit/64].Or(1 << (bit % 64))
	}
}

func (b *bloom) clear() {
	for i := range b.words {
		b.words[i].Store(0)
	}
}
