package limiter

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/cluster"
)

// fakeRedis is the lease script's arithmetic (lease_redis.go) over an
// injected clock: simulations of several nodes are exact and instant. The
// same protocol against a real redis-server is tested in lease_redis_test.go
// and by the end-to-end tests.
type fakeRedis struct {
	mu      sync.Mutex
	clock   *fakeClock
	buckets map[string]*fakeBucket
	lost    map[string]map[string]bool // loss marks: the nodes that charged
	down    atomic.Bool
	calls   atomic.Int64
	spent   atomic.Int64 // debt reported
}

type fakeBucket struct {
	tk, ts  float64
	w, c, p float64
	seen    bool
}

func newFakeRedis(c *fakeClock) *fakeRedis {
	return &fakeRedis{clock: c, buckets: map[string]*fakeBucket{}, lost: map[string]map[string]bool{}}
}

func (f *fakeRedis) Healthy() bool { return !f.down.Load() }

// forget drops every counter and mark, as a Redis restarted without
// persistence.
func (f *fakeRedis) forget() {
	f.mu.Lock()
	clear(f.buckets)
	clear(f.lost)
	f.mu.Unlock()
}
func (f *fakeRedis) Stepped() bool { return true }

func (f *fakeRedis) Lease(timeout time.Duration, reqs []LeaseRequest, out []LeaseResult) error {
	return f.leaseAs("", timeout, reqs, out)
}

// fakeNode is one node's connection to a fakeRedis: its calls carry the
// node's name, as cluster.Client's carry Options.NodeID.
type fakeNode struct {
	*fakeRedis
	name string
}

func (n fakeNode) Lease(timeout time.Duration, reqs []LeaseRequest, out []LeaseResult) error {
	return n.leaseAs(n.name, timeout, reqs, out)
}

func (f *fakeRedis) leaseAs(node string, _ time.Duration, reqs []LeaseRequest, out []LeaseResult) error {
	if f.down.Load() {
		return cluster.ErrDegraded
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := float64(f.clock.ns.Load() / 1000) // µs, as TIME
	for i, r := range reqs {
		f.calls.Add(1)
		if r.Spent > 0 {
			f.spent.Add(r.Spent)
		}
		// A counter found lost while its node has some in use is marked,
		// and each node charges its own in use once per mark.
		b := f.buckets[r.Key]
		charge := false
		if b == nil {
			b = &fakeBucket{}
			f.buckets[r.Key] = b
			if r.InUse > 0 {
				f.lost[r.Key] = map[string]bool{node: true}
				charge = true
			}
		} else if m := f.lost[r.Key]; m != nil && !m[node] {
			m[node], charge = true, true
		}
		spent := float64(r.Spent)
		if charge && r.InUse > r.Spent {
			spent = float64(r.InUse)
		}
		limit, per := r.Limit, float64(max(1, int64(r.Per/time.Microsecond)))
		burst, want := math.Max(r.Burst, 1), float64(r.Want)
		var grant, level, wait, left float64
		if r.Alg == LeaseTokenBucket {
			if !b.seen {
				b.tk, b.ts, b.seen = burst, now, true
			}
			if now > b.ts {
				b.tk += (now - b.ts) * limit / per
				b.ts = now
			}
			b.tk = math.Min(b.tk, burst) - spent
			b.tk = math.Max(math.Min(b.tk, burst), -burst)
			if want > 0 && b.tk >= 1 {
				grant = math.Min(want, math.Floor(b.tk))
				b.tk -= grant
			}
			if grant < want {
				wait = math.Ceil((want - grant - b.tk) * per / limit)
			}
			level = b.tk
		} else if r.Alg == LeaseLeakyBucket {
			gap := per / limit
			if !b.seen || b.tk < now {
				b.tk, b.seen = now, true // tk: the next free slot (µs)
			}
			b.tk = math.Max(b.tk+spent*gap, now)
			horizon := now + (burst-1)*gap
			level = b.tk - now
			if want > 0 && b.tk <= horizon {
				grant = math.Min(want, math.Floor((horizon-b.tk)/gap)+1)
				b.tk += grant * gap
			}
			if grant < want {
				wait = math.Max(0, math.Ceil(b.tk-horizon))
			}
		} else {
			w := math.Floor(now / per)
			switch {
			case !b.seen:
				b.c, b.p, b.seen = 0, 0, true
			case b.w == w-1:
				b.p, b.c = b.c, 0
			case b.w != w:
				b.c, b.p = 0, 0
			}
			b.w = w
			if r.Alg == LeaseFixedWindow {
				b.p = 0
			}
			left = (w+1)*per - now
			weight := 0.0
			if r.Alg == LeaseSlidingWindow {
				weight = left / per
			}
			b.c = math.Max(0, b.c+spent)
			room := limit - (b.p*weight + b.c)
			if want > 0 && room >= 1 {
				grant = math.Min(want, math.Floor(room))
				b.c += grant
			}
			level = limit - (b.p*weight + b.c)
			if grant < want {
				wait = left
				if r.Alg == LeaseSlidingWindow && b.p > 0 {
					wait = math.Min(wait, math.Ceil(((want-grant)-level)*per/b.p))
				}
			}
		}
		out[i] = LeaseResult{Granted: int64(grant), Level: level,
			Wait: time.Duration(wait) * time.Microsecond, WindowLeft: time.Duration(left) * time.Microsecond}
	}
	return nil
}
