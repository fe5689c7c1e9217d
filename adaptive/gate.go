package adaptive

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/internal/stripe"
	"github.com/tollgate/tollgate/pipeline"
)

// maxLines is how many event loops get a line of their own; a request on a
// loop beyond it (or on no loop) waits by polling instead.
const maxLines = 64

// pollStep is how often a request without a line looks for a free slot.
const pollStep = 250 * time.Microsecond

// Decision names the refusal in metrics and the access log.
const Decision = "concurrency limit reached"

// Gate admits at most its limit of requests at once on this node.
type Gate struct {
	est      *estimator
	inFlight atomic.Int64
	maxWait  time.Duration
	refusal  *pipeline.Canned

	waiting  atomic.Int64
	admitted atomic.Uint64
	waited   atomic.Uint64 // admitted after waiting
	refused  atomic.Uint64

	lines [maxLines]line
}

// line is one loop's requests waiting for a slot, first in first out.
// Only that loop touches it.
type line struct {
	_      stripe.Pad
	q      pipeline.ParkQueue
	parked int // in q and not yet woken
}

// Ticket is what Acquire hands to Release: the estimator's epoch the
// request was admitted in.
type Ticket struct {
	epoch uint32
	held  bool
}

// Held reports that the ticket holds a slot.
func (t Ticket) Held() bool { return t.held }

// NewGate builds a gate from settings validated by Settings.Check.
func NewGate(s *Settings, now time.Time) *Gate {
	refusal := pipeline.NewCanned(s.Status, Decision).WithHeader("Retry-After", strconv.Itoa(s.RetryAfter))
	return &Gate{est: newEstimator(s, now), maxWait: s.MaxWait.D(), refusal: refusal}
}

// tryTake takes a slot when fewer than the limit are in flight.
func (g *Gate) tryTake() bool {
	for {
		n := g.inFlight.Load()
		if n >= g.est.limit.Load() {
			return false
		}
		if g.inFlight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (g *Gate) line(c *pipeline.Ctx) *line {
	if c.Loop == nil {
		return nil
	}
	if id := c.Loop.ID(); id >= 0 && id < maxLines {
		return &g.lines[id]
	}
	return nil
}

// Acquire takes a slot for c, waiting at most max_wait; when none frees
// in time it answers c with the refusal and reports false.
func (g *Gate) Acquire(c *pipeline.Ctx) (Ticket, bool) {
	ln := g.line(c)
	if ln != nil {
		g.handOver(ln) // slots free while some wait go to them first
	}
	if (ln == nil || ln.parked == 0) && g.tryTake() {
		return g.admit(false), true
	}
	if g.maxWait > 0 && g.wait(c, ln) {
		return g.admit(true), true
	}
	g.refused.Add(1)
	c.Decision = Decision
	c.Reject(g.refusal)
	return Ticket{}, false
}

func (g *Gate) admit(waited bool) Ticket {
	g.admitted.Add(1)
	if waited {
		g.waited.Add(1)
	}
	return Ticket{epoch: g.est.epoch.Load(), held: true}
}

// wait parks c in its loop's line until a completion hands it a slot or
// max_wait passes; a request without a line polls.
func (g *Gate) wait(c *pipeline.Ctx, ln *line) bool {
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	if ln == nil {
		for waited := time.Duration(0); waited < g.maxWait; waited += pollStep {
			c.Sleep(min(pollStep, g.maxWait-waited))
			if g.tryTake() {
				return true
			}
		}
		return false
	}
	ln.parked++
	if c.Loop.Park(&ln.q, g.maxWait) {
		return true // woken with the waker's slot (handOver counted it)
	}
	ln.parked--
	return g.tryTake() // a slot may have freed on another loop
}

// handOver wakes the first requests of ln for as many slots as are free.
func (g *Gate) handOver(ln *line) {
	for ln.parked > 0 && g.tryTake() {
		ln.parked--
		if !ln.q.WakeOne() {
			ln.parked = 0
			g.inFlight.Add(-1)
			return
		}
	}
}

// Release gives t's slot back, counting latency (the upstream exchange's)
// as a sample unless the request never reached the backend (counted
// false); failed says the backend failed to answer.
func (g *Gate) Release(c *pipeline.Ctx, t Ticket, latency time.Duration, counted, failed bool) {
	if !t.held {
		return
	}
	n := g.inFlight.Add(-1)
	if counted {
		g.est.record(t.epoch, latency, failed, n+1, c.Now().UnixNano())
	}
	if ln := g.line(c); ln != nil {
		g.handOver(ln)
	}
}

// Release for an outcome: see Gate.Release.
func (g *Gate) ReleaseOutcome(c *pipeline.Ctx, t Ticket) {
	o := &c.Outcome
	g.Release(c, t, o.Latency, o.Counted(), o.Result.UpstreamFailure())
}
