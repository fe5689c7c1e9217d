package observe

import "sync/atomic"

// Stats are the gateway's running counters. The zero value is ready; every
// method is safe for concurrent use and allocation-free.
type Stats struct {
	requests    atomic.Uint64
	byClass     [6]atomic.Uint64 // index = status/100; 0 collects odd codes
	parseErrors atomic.Uint64
	inFlight    atomic.Int64
}

// Begin counts a request as started.
func (s *Stats) Begin() { s.inFlight.Add(1) }

// End counts a finished request with its status.
func (s *Stats) End(status int) {
	s.inFlight.Add(-1)
	s.requests.Add(1)
	cls := status / 100
	if cls < 1 || cls > 5 {
		cls = 0
	}
	s.byClass[cls].Add(1)
}

// ParseError counts a request refused before it was parsed whole.
func (s *Stats) ParseError() { s.parseErrors.Add(1) }

// Snapshot is a point-in-time copy of Stats.
type Snapshot struct {
	Requests    uint64    `json:"requests"`
	ByClass     [6]uint64 `json:"by_status_class"`
	ParseErrors uint64    `json:"parse_errors"`
	InFlight    int64     `json:"in_flight"`
}

// Read copies the counters.
func (s *Stats) Read() Snapshot {
	out := Snapshot{Requests: s.requests.Load(), ParseErrors: s.parseErrors.Load(), InFlight: s.inFlight.Load()}
	for i := range s.byClass {
		out.ByClass[i] = s.byClass[i].Load()
	}
	return out
}
