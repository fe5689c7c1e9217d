//go:build race

package reactor_test

// raceEnabled: the race detector slows the gateway several times over, so
// latency bounds loosen under it.
const raceEnabled = true
