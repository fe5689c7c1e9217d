package limiter

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestTableFindsWhatItHolds(t *testing.T) {
	tb := newTable(10_000, TokenBucket, s1)
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([]uint64, 5000)
	for i := range keys {
		keys[i] = keyOf(rng.Uint64())
		s, sl, created := tb.lock(keys[i], t0)
		if !created {
			t.Fatalf("key %d existed", i)
		}
		sl.st.A = int64(i) + 1
		s.mu.Unlock()
	}
	for i, k := range keys {
		s, sl := tb.peek(k)
		if sl == nil || sl.st.A != int64(i)+1 {
			t.Fatalf("key %d lost: %+v", i, sl)
		}
		s.mu.Unlock()
	}
	if st := tb.stats(); st.Keys != 5000 || st.Evictions != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestTableRemoveKeepsProbeChains checks backward-shift deletion against
// a map: after random inserts and evictions every held key is found with
// its own state.
func TestTableRemoveKeepsProbeChains(t *testing.T) {
	tb := newTable(tableShards*40, TokenBucket, s1) // 40 keys a shard: evictions all the time
	rng := rand.New(rand.NewPCG(3, 4))
	model := map[uint64]int64{}
	for i := range 200_000 {
		k := keyOf(rng.Uint64() % 20_000)
		s, sl, created := tb.lock(k, t0)
		if created {
			sl.st.A = int64(i)
			model[k] = int64(i)
		} else if sl.st.A != model[k] {
			t.Fatalf("key %x: state %d, want %d", k, sl.st.A, model[k])
		}
		s.mu.Unlock()
	}
	held := 0
	for k, v := range model {
		s, sl := tb.peek(k)
		if sl != nil {
			held++
			if sl.st.A != v {
				t.Fatalf("key %x: state %d, want %d", k, sl.st.A, v)
			}
		}
		s.mu.Unlock()
	}
	st := tb.stats()
	if st.Keys != held || st.Keys > tableShards*40 {
		t.Fatalf("table holds %d (found %d), bound %d", st.Keys, held, tableShards*40)
	}
}

// TestHotKeySurvivesAFlood: a million one-off keys through a table that
// holds 64k must not evict a key that keeps being used, so its limit
// holds all along.
func TestHotKeySurvivesAFlood(t *testing.T) {
	l := NewLimit(TokenBucket, 10, time.Second, 15, 0)
	slow := NewLimit(TokenBucket, 1, time.Hour, 1, 0) // flood keys stay busy: none is idle
	tb := newTable(1<<16, TokenBucket, s1)
	hot := keyOf(42)
	admitted := 0
	rng := rand.New(rand.NewPCG(5, 6))
	now := t0
	for i := range 1_000_000 {
		now += 10_000 // 10 s over the run: 100k keys/s
		k := keyOf(rng.Uint64())
		s, sl, _ := tb.lock(k, now)
		slow.Take(&sl.st, now)
		s.mu.Unlock()
		if i%100 == 0 { // the hot key: 1000/s offered
			s, sl, _ := tb.lock(hot, now)
			if l.Take(&sl.st, now).OK {
				admitted++
			}
			s.mu.Unlock()
		}
	}
	if max := 15 + 10*10; admitted > max {
		t.Fatalf("hot key admitted %d in 10 s, want at most %d: its counter was evicted", admitted, max)
	}
	st := tb.stats()
	if st.Keys > 1<<16 || st.ActiveEvict == 0 {
		t.Fatalf("stats %+v", st)
	}
	t.Logf("hot key admitted %d; %+v", admitted, st)
}

// TestBlockedKeysAreEvictedLast: keys under reject_for stay while others
// can go.
func TestBlockedKeysAreEvictedLast(t *testing.T) {
	tb := newTable(tableShards*8, TokenBucket, s1)
	var blocked []uint64
	rng := rand.New(rand.NewPCG(7, 8))
	for range 100 {
		k := keyOf(rng.Uint64())
		s, sl, _ := tb.lock(k, t0)
		sl.until = t0 + 600*s1
		s.mu.Unlock()
		blocked = append(blocked, k)
	}
	for range 100_000 {
		s, sl, _ := tb.lock(keyOf(rng.Uint64()), t0)
		sl.st.A = t0 + s1 // not idle
		s.mu.Unlock()
	}
	kept := 0
	for _, k := range blocked {
		s, sl := tb.peek(k)
		if sl != nil && sl.until > t0 {
			kept++
		}
		s.mu.Unlock()
	}
	if kept != len(blocked) {
		t.Fatalf("%d of %d blocked keys kept through a flood", kept, len(blocked))
	}
}

func TestTableConcurrent(t *testing.T) {
	tb := newTable(1000, TokenBucket, s1)
	l := NewLimit(TokenBucket, 1e6, time.Second, 1e6, 0)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for range 20_000 {
				s, sl, _ := tb.lock(keyOf(rng.Uint64()%3000), t0)
				l.Take(&sl.st, t0)
				s.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if st := tb.stats(); st.Keys > 1000+tableShards {
		t.Fatalf("held %d keys, bound 1000", st.Keys)
	}
}

// TestTableBytesPerKey measures the heap a million keys cost.
func TestTableBytesPerKey(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates ~60 MB")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tb := newTable(DefaultMaxKeys, TokenBucket, s1)
	rng := rand.New(rand.NewPCG(10, 11))
	for range DefaultMaxKeys {
		s, _, _ := tb.lock(keyOf(rng.Uint64()), t0)
		s.mu.Unlock()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	st := tb.stats()
	per := float64(after.HeapAlloc-before.HeapAlloc) / float64(st.Keys)
	t.Logf("%d keys in %d slots: %.1f bytes per key (heap)", st.Keys, st.Slots, per)
	if per > 80 {
		t.Fatalf("%.1f bytes per key, want <= 80", per)
	}
	runtime.KeepAlive(tb)
}
