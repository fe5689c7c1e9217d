package observe

import (
	"sync/atomic"

	"github.com/tollgate/tollgate/internal/stripe"
)

// Stats are the gateway's running counters. The zero value is ready; every
// method is safe for concurrent use and allocation-free. Each loop counts
// in its own stripe (pipeline.Ctx.Stripe); Read sums them.
type Stats struct {
	_     stripe.Pad // off the line of the fields before it
	cells [stripe.N]statsCell
}

type statsCell struct {
	requests    atomic.Uint64
	byClass     [6]atomic.Uint64 // index = status/100; 0 collects odd codes
	parseErrors atomic.Uint64
	inFlight    atomic.Int64
	_           stripe.Pad
}

// Begin counts a request as started, in stripe s.
func (s *Stats) Begin(st int) { s.cells[st&(stripe.N-1)].inFlight.Add(1) }

// End counts a finished request with its status, in the stripe it began in.
func (s *Stats) End(st, status int) {
	c := &s.cells[st&(stripe.N-1)]
	c.inFlight.Add(-1)
	c.requests.Add(1)
	c.byClass[statusClass(status)].Add(1)
}

// statusClass is status/100 for 1xx…5xx, 0 for odd codes.
func statusClass(status int) int {
	cls := status / 100
	if cls < 1 || cls > 5 {
		cls = 0
	}
	return cls
}

// ParseError counts a request refused before it was parsed whole.
func (s *Stats) ParseError(st int) { s.cells[st&(stripe.N-1)].parseErrors.Add(1) }

// Snapshot is a point-in-time copy of Stats.
type Snapshot struct {
	Requests    uint64    `json:"requests"`
	ByClass     [6]uint64 `json:"by_status_class"`
	ParseErrors uint64    `json:"parse_errors"`
	InFlight    int64     `json:"in_flight"`
}

// Read sums the stripes. Requests that finish meanwhile may be counted in
// some fields and not yet in others.
func (s *Stats) Read() Snapshot {
	var out Snapshot
	for i := range s.cells {
		c := &s.cells[i]
		out.Requests += c.requests.Load()
		out.ParseErrors += c.parseErrors.Load()
		out.InFlight += c.inFlight.Load()
		for j := range c.byClass {
			out.ByClass[j] += c.byClass[j].Load()
		}
	}
	return out
}
