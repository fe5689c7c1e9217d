// Package stripe lays out the counters every request adds to so that two
// event loops never write the same cache line: each counter set has one
// cell per stripe, a loop writes only its own stripe's cell, and a reader
// sums the cells.
//
// A counter all loops add to moves its cache line from core to core at
// every request, as nginx's per-worker counters never do; the cost shows
// in BenchmarkProxyPathTwoLoops (server) beside BenchmarkProxyPath.
package stripe

import "golang.org/x/sys/cpu"

// N is the number of stripes. Loops beyond N share stripes (loop ID mod
// N): a gateway with more loops than N still spreads its writes N ways.
const N = 8

// Of is the stripe of the loop with this ID (its index among the
// transport's loops); requests that run on no loop use stripe 0.
func Of(loopID int) int { return loopID & (N - 1) }

// Pad ends a cell type: the fields of the next cell start a cache line
// further on, so no line holds the fields of two stripes.
type Pad = cpu.CacheLinePad
