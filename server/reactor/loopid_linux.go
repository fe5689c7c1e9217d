//go:build linux

package reactor

import "sync"

// Loop ids (pipeline.Loop.ID) are unique among the process's live loops,
// not per transport: the upstream pools are kept per loop id, and a
// gateway with a cleartext and a TLS listener runs a transport for each.
// With both transports' first loop numbered 0, the second's requests took
// connections the first loop had dialed and watches, and waited for them
// with poll(2), holding their own loop: under h2load the listener served
// second cost twice the CPU per request of the first.
var loopIDs struct {
	mu   sync.Mutex
	used []bool
}

// takeLoopID returns the lowest id no live loop has.
func takeLoopID() int {
	loopIDs.mu.Lock()
	defer loopIDs.mu.Unlock()
	for i, u := range loopIDs.used {
		if !u {
			loopIDs.used[i] = true
			return i
		}
	}
	loopIDs.used = append(loopIDs.used, true)
	return len(loopIDs.used) - 1
}

// releaseLoopID gives back the id of a loop that has stopped.
func releaseLoopID(id int) {
	loopIDs.mu.Lock()
	if id >= 0 && id < len(loopIDs.used) {
		loopIDs.used[id] = false
	}
	loopIDs.mu.Unlock()
}
