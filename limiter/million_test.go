//go:build !race

package limiter

import (
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/pipeline"
)

// rssBytes is this process's resident set (Linux), 0 elsewhere.
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestMillionClientIPs sends a million distinct client addresses through a
// per-IP limit in 10 s (of injected time) while one hot address sends
// 1000/s: memory stays within the stated bytes per key (and near them
// while the keys arrive), and the hot address is held to its limit all
// along (its counter is never evicted).
func TestMillionClientIPs(t *testing.T) {
	if testing.Short() {
		t.Skip("a million requests")
	}
	e := newEnv()
	f := e.build(t, "r", "[{by: ip, rate: 10, per: 1s}]")
	c := req{}.ctx(t)
	defer pipeline.Release(c)
	hot := netip.MustParseAddr("198.51.100.1")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rss0 := rssBytes()
	admittedHot := 0
	var peakHeap uint64 // heap in use, sampled while the keys arrive
	var ms runtime.MemStats
	for i := range 1_000_000 {
		e.clock.Add(10 * time.Microsecond)
		c.ClientIP = netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		f.Handle(c)
		if i%10_000 == 0 {
			runtime.ReadMemStats(&ms)
			peakHeap = max(peakHeap, ms.HeapInuse)
		}
		if i%100 == 0 {
			c.ClientIP = hot
			if f.Handle(c) == pipeline.Continue {
				admittedHot++
			}
		}
	}
	rssFilled := rssBytes()
	runtime.ReadMemStats(&ms)
	peakHeap = max(peakHeap, ms.HeapInuse)
	runtime.GC()
	runtime.ReadMemStats(&after)
	rss1 := rssBytes()
	rep := f.Rules()[0]
	heap := float64(after.HeapAlloc) - float64(before.HeapAlloc)
	t.Logf("1,000,000 client addresses: %d keys held, live heap +%.1f MiB (%.1f bytes per key); heap in use at most %.1f MiB while they arrived (from %.1f); RSS %.1f -> %.1f MiB filled, %.1f MiB after a collection; hot address admitted %d of 10,000 (limit 15 + 10 s × 10/s)",
		rep.Keys, heap/(1<<20), heap/float64(rep.Keys), float64(peakHeap)/(1<<20), float64(before.HeapInuse)/(1<<20),
		float64(rss0)/(1<<20), float64(rssFilled)/(1<<20), float64(rss1)/(1<<20), admittedHot)
	if admittedHot > 15+100 || admittedHot < 100 {
		t.Fatalf("hot address admitted %d, want 115", admittedHot)
	}
	if heap/float64(rep.Keys) > 80 {
		t.Fatalf("%.1f bytes per key", heap/float64(rep.Keys))
	}
	// The heap in use while the keys arrive stays near what they keep: no
	// step of growth copies a whole table for a few more keys.
	if grown := float64(peakHeap) - float64(before.HeapInuse); grown > 52<<20 {
		t.Fatalf("heap in use grew by %.1f MiB while the keys arrived", grown/(1<<20))
	}
	if rss1 > 0 && rss1-rss0 > 150<<20 {
		t.Fatalf("RSS grew by %d MB", (rss1-rss0)>>20)
	}
}
