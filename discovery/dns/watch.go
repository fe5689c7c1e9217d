package dns

import (
	"context"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/tollgate/tollgate/discovery"
)

// Watch asks the target's records, reports the set through update the
// first time and whenever it changes, and asks again when the TTL of the
// records used, clamped to [min_ttl, max_ttl], runs out. A failure (no
// server answered, or all answered an error) goes to fail and is retried
// after a back-off that starts at min_ttl and doubles up to max_ttl; it
// never calls update, so a registry that is down never empties a service.
func (t *target) Watch(ctx context.Context, update func([]discovery.Instance), fail func(error)) {
	var last []discovery.Instance
	reported := false
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		set, ttl, err := t.resolve(ctx)
		if ctx.Err() != nil {
			return
		}
		var wait time.Duration
		if err != nil {
			fail(err)
			backoff = nextBackoff(backoff, t.clamp.minTTL, t.clamp.maxTTL)
			wait = backoff
		} else {
			backoff = 0
			if set == nil {
				set = []discovery.Instance{} // an answer: empty, not absent
			}
			if !reported || !reflect.DeepEqual(set, last) {
				update(set)
				last, reported = set, true
			}
			wait = t.refreshAfter(ttl)
		}
		timer := time.NewTimer(jitter(wait))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// refreshAfter clamps a TTL in seconds to [min_ttl, max_ttl].
func (t *target) refreshAfter(ttl uint32) time.Duration {
	d := time.Duration(ttl) * time.Second
	return min(max(d, t.clamp.minTTL), t.clamp.maxTTL)
}

func nextBackoff(prev, lo, hi time.Duration) time.Duration {
	if prev == 0 {
		return lo
	}
	return min(prev*2, hi)
}

// jitter takes up to a tenth off d, so that the targets started together
// by one reload do not all ask the servers in the same instant forever.
func jitter(d time.Duration) time.Duration {
	return d - time.Duration(rand.Int64N(int64(d)/10+1))
}
