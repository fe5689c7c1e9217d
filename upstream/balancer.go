package upstream

import (
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	"github.com/tollgate/tollgate/internal/stripe"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/source"
)

// Balancer picks the instance for the next upstream try.
//
// Pick must be safe for concurrent use and allocate nothing. It skips
// instances that are not Available and the one in exclude (the instance a
// retry must avoid); it returns nil when nothing is left. A retry
// (exclude != nil) never goes to an instance that is not Available.
type Balancer interface {
	Pick(c *pipeline.Ctx, exclude *Instance) *Instance
}

// RoundRobin is nginx's smooth weighted round robin, precomputed: the
// schedule the algorithm produces over one full cycle (sum of weights) is
// built once, and picking is one atomic increment into it. Weights 3:1 give
// a a b a, never a a a b (ties go to the first instance, as in nginx).
type RoundRobin struct {
	instances []*Instance
	schedule  []uint16
	next      cursor
}

// cursor is a position in a rotation, one per loop stripe: each loop
// walks the rotation on its own, starting at its stripe's index, so a
// pick writes no cache line another loop writes. Every loop's picks
// follow the weights, so all of them together do.
type cursor struct {
	_     stripe.Pad // off the line of the fields every pick reads
	cells [stripe.N]cursorCell
}

type cursorCell struct {
	n atomic.Uint64
	_ stripe.Pad
}

// advance returns the position for c's pick and moves its stripe's on.
func (cur *cursor) advance(c *pipeline.Ctx) uint64 {
	st := 0
	if c != nil {
		st = c.Stripe()
	}
	return cur.cells[st].n.Add(1) - 1 + uint64(st)
}

// NewRoundRobin builds the schedule for instances' weights (a weight below 1
// counts as 1). Weights are divided by their greatest common divisor first,
// so 300:100 costs no more than 3:1.
func NewRoundRobin(instances []*Instance) *RoundRobin {
	weights := make([]int, len(instances))
	g := 0
	for i, in := range instances {
		w := max(in.Weight, 1)
		weights[i] = w
		g = gcd(g, w)
	}
	total := 0
	for i := range weights {
		weights[i] /= g
		total += weights[i]
	}
	weights, total = boundSchedule(weights, total)
	rr := &RoundRobin{instances: instances, schedule: lineApart(total)}
	current := make([]int, len(weights))
	for range total {
		best := 0
		for i, w := range weights {
			current[i] += w
			if current[i] > current[best] {
				best = i
			}
		}
		current[best] -= total
		rr.schedule = append(rr.schedule, uint16(best))
	}
	return rr
}

// maxScheduleWork bounds the schedule's build (cycle length × instances
// steps): a registry's set of thousands of instances with uneven weights
// would otherwise take seconds of CPU at every change.
const maxScheduleWork = 1 << 26

// boundSchedule scales weights down together, each kept at least 1, when
// building their cycle would pass maxScheduleWork; weights that fit are
// returned as they are.
func boundSchedule(weights []int, total int) ([]int, int) {
	n := len(weights)
	if total*n <= maxScheduleWork {
		return weights, total
	}
	// Room for the cycle, less one per instance for the weights that
	// round up to 1.
	room := max(maxScheduleWork/n-n, 0)
	scaled := 0
	for i, w := range weights {
		weights[i] = max(1, int(int64(w)*int64(room)/int64(total)))
		scaled += weights[i]
	}
	return weights, scaled
}

// lineApart returns an empty slice with room for n entries that shares
// no cache line with another object: every pick reads it, and a small
// object's heap neighbours may be written by another loop.
func lineApart(n int) []uint16 {
	const line = 32 // uint16s in 64 bytes
	return make([]uint16, line+n+line)[line : line : line+n]
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Pick implements Balancer.
func (rr *RoundRobin) Pick(c *pipeline.Ctx, exclude *Instance) *Instance {
	n := uint64(len(rr.schedule))
	if n == 0 {
		return nil
	}
	start := rr.next.advance(c)
	// One full cycle visits every instance at least once.
	for i := uint64(0); i < n; i++ {
		in := rr.instances[rr.schedule[(start+i)%n]]
		if in != exclude && in.Available() {
			return in
		}
	}
	return lastResort(rr.instances, exclude)
}

// LeastConn picks the instance with the fewest requests in flight relative
// to its weight; ties go to the instance after the previous winner, so equal
// instances share load instead of the first one taking it all.
type LeastConn struct {
	instances []*Instance
	next      cursor
}

// NewLeastConn returns a least-connections balancer over instances.
func NewLeastConn(instances []*Instance) *LeastConn {
	return &LeastConn{instances: instances}
}

// Pick implements Balancer.
func (lc *LeastConn) Pick(c *pipeline.Ctx, exclude *Instance) *Instance {
	n := len(lc.instances)
	if n == 0 {
		return nil
	}
	start := int(lc.next.advance(c) % uint64(n))
	var best *Instance
	var bestLoad, bestWeight int64
	for i := 0; i < n; i++ {
		in := lc.instances[(start+i)%n]
		if in == exclude || !in.Available() {
			continue
		}
		load, w := in.InFlight(), int64(max(in.Weight, 1))
		// load/w < bestLoad/bestWeight without division.
		if best == nil || load*bestWeight < bestLoad*w {
			best, bestLoad, bestWeight = in, load, w
		}
	}
	if best == nil {
		return lastResort(lc.instances, exclude)
	}
	return best
}

// lastResort is the first try's answer when every instance is ejected
// (which ejection avoids, but a race or disabled siblings can cause):
// trying one costs a fast error at worst, while refusing outright would
// turn one bad minute into an outage. A retry never takes it; disabled
// instances never.
func lastResort(instances []*Instance, exclude *Instance) *Instance {
	if exclude != nil {
		return nil
	}
	var pick *Instance
	for _, in := range instances {
		if in.disabled.Load() {
			continue
		}
		if pick == nil || in.health.nextProbe.Load() < pick.health.nextProbe.Load() {
			pick = in
		}
	}
	return pick
}

// Hash is consistent hashing on a request value (`balance: hash`, `key:
// header.X-User-Id` or any source): a key keeps its instance while that
// instance is up, and adding or removing one of N instances moves about
// 1/N of the keys. Each instance owns weight × 160 points on a ring of
// 64-bit hashes; a key goes to the owner of the first point at or after
// its hash, skipping instances that are out (whose keys alone move, to the
// next owners along the ring). Requests without the key are spread round
// robin.
type Hash struct {
	instances []*Instance
	key       source.Source
	points    []uint64
	owners    []uint16
	rr        cursor
}

// hashPoints is how many ring points an instance of weight 1 owns.
const hashPoints = 160

// maxRingPoints bounds the ring (12 bytes a point): a set of thousands of
// heavy instances gets fewer points per unit of weight, at least one,
// instead of hundreds of megabytes.
const maxRingPoints = 1 << 20

// NewHash builds the ring.
func NewHash(instances []*Instance, key source.Source) *Hash {
	h := &Hash{instances: instances, key: key}
	units := 0
	for _, in := range instances {
		units += max(in.Weight, 1)
	}
	perUnit := hashPoints
	if units*hashPoints > maxRingPoints {
		perUnit = max(1, maxRingPoints/units)
	}
	type point struct {
		at    uint64
		owner uint16
	}
	var ps []point
	for i, in := range instances {
		for v := range max(in.Weight, 1) * perUnit {
			ps = append(ps, point{xxhash.Sum64String(in.Addr + "#" + strconv.Itoa(v)), uint16(i)})
		}
	}
	slices.SortFunc(ps, func(a, b point) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return int(a.owner) - int(b.owner)
	})
	for _, p := range ps {
		h.points = append(h.points, p.at)
		h.owners = append(h.owners, p.owner)
	}
	return h
}

// Pick implements Balancer.
func (h *Hash) Pick(c *pipeline.Ctx, exclude *Instance) *Instance {
	if len(h.points) == 0 {
		return nil
	}
	var v []byte
	if c != nil {
		r := source.NewReader(c)
		v, _ = r.Value(&h.key)
	}
	if len(v) == 0 {
		n := uint64(len(h.instances))
		start := h.rr.advance(c)
		for i := uint64(0); i < n; i++ {
			if in := h.instances[(start+i)%n]; in != exclude && in.Available() {
				return in
			}
		}
		return lastResort(h.instances, exclude)
	}
	return h.owner(xxhash.Sum64(v), exclude)
}

// owner walks the ring from hash to the first available owner.
func (h *Hash) owner(hash uint64, exclude *Instance) *Instance {
	i, _ := slices.BinarySearch(h.points, hash)
	for n := 0; n < len(h.points); n++ {
		in := h.instances[h.owners[(i+n)%len(h.points)]]
		if in != exclude && in.Available() {
			return in
		}
	}
	return lastResort(h.instances, exclude)
}
