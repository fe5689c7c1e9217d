package testutil

import (
	"os"
	"runtime"
	"strconv"
	"strings"
)

// MiB is a mebibyte, the unit memory bounds are stated in.
const MiB = 1 << 20

// MemSample is what the process holds at one moment.
type MemSample struct {
	Live uint64 // heap objects still reachable after a GC, plus goroutine stacks
	RSS  uint64 // VmRSS
}

// SampleMem collects garbage first, so Live counts what the gateway
// holds, not what it dropped.
func SampleMem() MemSample {
	runtime.GC()
	runtime.GC() // and what sync.Pools kept from the last one
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return MemSample{Live: m.HeapAlloc + m.StackInuse, RSS: RSS()}
}

// RSS reads the resident set size from /proc/self/status, 0 if it can't.
func RSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				kib, _ := strconv.ParseUint(f[0], 10, 64)
				return kib << 10
			}
		}
	}
	return 0
}

// Grew is how far b is above a, 0 if below.
func Grew(a, b uint64) uint64 {
	if b < a {
		return 0
	}
	return b - a
}
