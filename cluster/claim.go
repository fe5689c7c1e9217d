package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// workerIdle is how long an idle worker waits for another call before it
// exits.
const workerIdle = 10 * time.Second

// call is one request-path Redis call handed to a worker. Calls are pooled;
// a call whose caller gave up (timeout) is left to the worker and the
// garbage collector instead, so a late answer never reaches a reused call.
type call struct {
	rc    rueidis.Client
	key   string
	ttl   time.Duration
	done  chan result // capacity 1: the worker never blocks on it
	timer *time.Timer // the caller's budget
}

type result struct {
	fresh bool
	err   error
}

var callPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &call{done: make(chan result, 1), timer: t}
}}

// Claim records key for ttl if it is not recorded yet, atomically (SET
// key 1 NX EX ttl; PX when ttl is not whole seconds). fresh is true when
// the key did not exist: the caller is the first to claim it, on any node
// sharing this Redis. It is the request path's one Redis call, and what
// the key means (a replay nonce, say) is the caller's business.
//
// It returns within Options.Budget whatever Redis does. On a timeout, an
// error or too many calls in flight it returns ErrDegraded and puts the
// Client in degraded mode; while degraded it returns ErrDegraded at once
// without contacting Redis. A call that timed out may still reach Redis
// later, so a key whose claim returned ErrDegraded can be reported as not
// fresh by a later claim: callers decide such a claim locally and must not
// retry it as if it never happened. Claims refused while degraded are
// remembered and written once Redis is back (see deferClaim).
func (c *Client) Claim(key string, ttl time.Duration) (fresh bool, err error) {
	if ttl <= 0 {
		return false, ErrBadTTL
	}
	if c.degraded.Load() {
		if c.closed.Load() {
			return false, ErrClosed
		}
		c.nRefused.Add(1)
		c.deferClaim(key, ttl)
		return false, ErrDegraded
	}
	if c.closed.Load() {
		return false, ErrClosed
	}
	down := *c.down.Load()
	rc := c.redis() // set before degraded mode is first cleared
	cl := callPool.Get().(*call)
	cl.timer.Reset(c.o.Budget)
	select {
	case c.sem <- struct{}{}:
	default:
		cl.timer.Stop()
		callPool.Put(cl)
		c.nSaturated.Add(1)
		c.markDegraded("too many redis calls in flight", nil)
		c.deferClaim(key, ttl)
		return false, ErrDegraded
	}
	cl.rc, cl.key, cl.ttl = rc, key, ttl
	select {
	case c.work <- cl: // an idle worker took it
	default:
		go c.worker(cl)
	}
	select {
	case r := <-cl.done:
		cl.timer.Stop()
		cl.rc, cl.key = nil, ""
		callPool.Put(cl)
		if r.err != nil {
			c.nErrors.Add(1)
			c.markDegraded("redis call failed", r.err)
			return false, ErrDegraded
		}
		return r.fresh, nil
	case <-cl.timer.C:
		c.nTimeouts.Add(1)
		c.markDegraded("redis call exceeded budget", nil)
		return false, ErrDegraded
	case <-down: // another call found Redis unavailable: stop waiting
		c.nRefused.Add(1)
		return false, ErrDegraded
	}
}

// backlogSize bounds the claims remembered while degraded (about 100 bytes
// each); beyond it they are dropped and counted.
const backlogSize = 1 << 16

// pendingClaim is a claim decided locally while Redis was away.
type pendingClaim struct {
	key string
	exp time.Time // when the claim would have expired in Redis
}

// deferClaim remembers a claim the caller decided without Redis. Nodes
// cannot see each other's claims while Redis is away, so a key claimed
// again on another node during that time is fresh there too (the
// availability the budget buys); writing the claims once Redis is back
// closes that gap for the rest of each key's lifetime instead of leaving
// it open until it expires.
func (c *Client) deferClaim(key string, ttl time.Duration) {
	select {
	case c.backlog <- pendingClaim{key: key, exp: time.Now().Add(ttl)}:
	default:
		c.nBackDrops.Add(1)
	}
}

// backfill writes the backlog after a recovery, off the request path, with
// the time each claim has left. It stops at the next degradation; what is
// left waits for the next recovery.
func (c *Client) backfill() {
	defer c.wg.Done()
	rc := c.redis()
	if rc == nil {
		return
	}
	for {
		if c.degraded.Load() {
			return
		}
		var p pendingClaim
		select {
		case p = <-c.backlog:
		case <-c.stop:
			return
		default:
			return
		}
		left := time.Until(p.exp)
		if left < time.Millisecond {
			continue
		}
		if r := claim(rc, p.key, left.Truncate(time.Millisecond)); r.err != nil {
			c.deferClaim(p.key, left) // try again after the next recovery
			return
		}
		c.nBackfilled.Add(1)
	}
}

// worker runs calls until it has been idle for workerIdle. The number of
// workers never exceeds MaxInFlight: a new one starts only when every
// existing worker is busy, and each busy worker holds a slot of c.sem.
func (c *Client) worker(cl *call) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		began := time.Now()
		r := claim(cl.rc, cl.key, cl.ttl)
		c.claimLat.observe(time.Since(began))
		done := cl.done
		<-c.sem
		done <- r // after this the call belongs to its caller again
		idle.Reset(workerIdle)
		select {
		case cl = <-c.work:
		case <-idle.C:
			return
		case <-c.stop:
			return
		}
	}
}

// claim runs SET key 1 NX EX|PX ttl. rueidis bounds the wait by
// ConnWriteTimeout (and its one-second escape for a silent connection);
// the caller's budget is enforced by Claim, not here.
func claim(rc rueidis.Client, key string, ttl time.Duration) result {
	b := rc.B().Set().Key(key).Value("1").Nx()
	var cmd rueidis.Completed
	if ttl%time.Second == 0 {
		cmd = b.ExSeconds(int64(ttl / time.Second)).Build()
	} else {
		cmd = b.PxMilliseconds(int64((ttl + time.Millisecond - 1) / time.Millisecond)).Build()
	}
	err := rc.Do(context.Background(), cmd).Error()
	switch {
	case err == nil:
		return result{fresh: true}
	case rueidis.IsRedisNil(err):
		return result{}
	default:
		return result{err: err}
	}
}
