package upstream

import (
	"sync/atomic"
)

// Balancer picks the instance for the next upstream try.
//
// Pick must be safe for concurrent use and allocate nothing. It skips
// instances that are not Available and the one in exclude (the instance a
// retry must avoid); it returns nil when nothing is left.
type Balancer interface {
	Pick(exclude *Instance) *Instance
}

// RoundRobin is nginx's smooth weighted round robin, precomputed: the
// schedule the algorithm produces over one full cycle (sum of weights) is
// built once, and picking is one atomic increment into it. Weights 3:1 give
// a a b a, never a a a b (ties go to the first instance, as in nginx).
type RoundRobin struct {
	instances []*Instance
	schedule  []uint16
	next      atomic.Uint64
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
	rr := &RoundRobin{instances: instances, schedule: make([]uint16, 0, total)}
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

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Pick implements Balancer.
func (rr *RoundRobin) Pick(exclude *Instance) *Instance {
	n := uint64(len(rr.schedule))
	if n == 0 {
		return nil
	}
	start := rr.next.Add(1) - 1
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
	next      atomic.Uint64
}

// NewLeastConn returns a least-connections balancer over instances.
func NewLeastConn(instances []*Instance) *LeastConn {
	return &LeastConn{instances: instances}
}

// Pick implements Balancer.
func (lc *LeastConn) Pick(exclude *Instance) *Instance {
	n := len(lc.instances)
	if n == 0 {
		return nil
	}
	start := int(lc.next.Add(1) % uint64(n))
	var best *Instance
	var bestLoad, bestWeight int64
	for i := 0; i < n; i++ {
		in := lc.instances[(start+i)%n]
		if in == exclude || !in.Available() {
			continue
		}
		load, w := in.inflight.Load(), int64(max(in.Weight, 1))
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

// lastResort returns an instance in cool-down when every other choice is
// gone: refusing outright because all instances failed recently would turn
// one bad second into an outage, while trying one costs a fast error at
// worst. The excluded instance is never returned.
func lastResort(instances []*Instance, exclude *Instance) *Instance {
	var pick *Instance
	for _, in := range instances {
		if in == exclude || in.disabled.Load() {
			continue
		}
		if pick == nil || in.downUntil.Load() < pick.downUntil.Load() {
			pick = in
		}
	}
	return pick
}
