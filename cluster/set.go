package cluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/zap"
)

// Storage format of a watched set (revocations, membership): a Redis
// sorted set whose members are the entries and whose scores are each
// entry's expiry in unix milliseconds.
//
//   - AddToSet runs addScript atomically: it adds the member (keeping the
//     later expiry if it is already there), removes members already
//     expired, and extends the key's own TTL to cover the new member, so
//     the key disappears when its last member expires.
//   - A view reads the whole set with ZRANGE key 0 -1 WITHSCORES through
//     rueidis client-side caching and drops expired members locally. The
//     command never changes (no "now" in it, unlike ZRANGE BYSCORE now
//     +inf), so it stays one cache entry: a steady state is served from
//     the local cache and costs Redis nothing, and any write to the key
//     makes Redis push an invalidation that triggers a refresh at once.
//
// Expiry compares the writer's clock (the score) with the reader's clock,
// so it is as precise as the nodes' clocks agree.
var addScript = rueidis.NewLuaScript(`
local cur = redis.call('ZSCORE', KEYS[1], ARGV[1])
if (not cur) or tonumber(cur) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3])
local pttl = redis.call('PTTL', KEYS[1])
if pttl < tonumber(ARGV[4]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
return 1
`)

// SetView is a node-local, read-only copy of a watched Redis set,
// refreshed in the background. Its read methods are lock-free and safe for
// concurrent use; Has does not allocate.
//
// While Redis is unavailable the view keeps its last contents unchanged,
// expired entries included (they are dropped again once Redis answers).
type SetView struct {
	c       *Client
	key     string
	refresh time.Duration

	snap  atomic.Pointer[setSnap]
	kick  chan struct{} // capacity 1: refresh now
	ready chan struct{} // closed after the first successful read

	// Owned by the refresh loop.
	entries []setEntry
	nextExp int64 // earliest expiry (unix ms) among published members; 0 = none
	loaded  bool
	lastErr string

	reads, fetches atomic.Uint64
}

type setEntry struct {
	member string
	exp    int64 // unix ms
}

// setSnap is an immutable published state of a view.
type setSnap struct {
	m       map[string]int64 // member → expiry (unix ms)
	updated time.Time        // when the contents were last confirmed current
}

var emptySnap = &setSnap{m: map[string]int64{}}

// WatchSet returns the view of the sorted set at key, starting its
// refresh loop: every refresh (DefaultRefresh when zero or negative), and
// at once when Redis reports the key changed. Watching the same key again
// returns the same view (with the first refresh interval). The loop stops
// at Close.
func (c *Client) WatchSet(key string, refresh time.Duration) *SetView {
	if refresh <= 0 {
		refresh = DefaultRefresh
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v := c.views[key]; v != nil {
		return v
	}
	v := &SetView{
		c:       c,
		key:     key,
		refresh: refresh,
		kick:    make(chan struct{}, 1),
		ready:   make(chan struct{}),
	}
	v.snap.Store(emptySnap)
	c.views[key] = v
	if !c.closed.Load() {
		c.wg.Add(1)
		go v.loop()
	}
	return v
}

// Has reports whether member is in the set (and not expired as of the
// last refresh). It reads an immutable snapshot: no lock, no allocation.
func (v *SetView) Has(member []byte) bool {
	_, ok := v.snap.Load().m[string(member)]
	return ok
}

// HasString is Has for a string.
func (v *SetView) HasString(member string) bool {
	_, ok := v.snap.Load().m[member]
	return ok
}

// Expiry reports when member's entry expires (unix ms, the writer's
// clock), false when the set does not hold it. Lock-free, no allocation.
func (v *SetView) Expiry(member string) (int64, bool) {
	exp, ok := v.snap.Load().m[member]
	return exp, ok
}

// Len is the number of members in the current snapshot.
func (v *SetView) Len() int { return len(v.snap.Load().m) }

// Members returns the current members, sorted (a copy; for admin pages).
func (v *SetView) Members() []string {
	m := v.snap.Load().m
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Updated is when the view was last confirmed current, from Redis or from
// the client-side cache that Redis keeps invalidated (zero before the first
// read): how stale the view may be while Redis is unavailable.
func (v *SetView) Updated() time.Time { return v.snap.Load().updated }

// Ready is closed once the view has read Redis successfully for the first
// time.
func (v *SetView) Ready() <-chan struct{} { return v.ready }

// ViewStats counts a view's refreshes.
type ViewStats struct {
	// Reads counts refreshes that asked rueidis for the set (degraded
	// refreshes do not); Fetches counts the ones that were not served by
	// the client-side cache, i.e. cost a Redis round trip.
	Reads, Fetches uint64
}

// Stats returns the view's counters.
func (v *SetView) Stats() ViewStats {
	return ViewStats{Reads: v.reads.Load(), Fetches: v.fetches.Load()}
}

func (v *SetView) poke() {
	select {
	case v.kick <- struct{}{}:
	default:
	}
}

func (v *SetView) loop() {
	defer v.c.wg.Done()
	t := time.NewTicker(v.refresh)
	defer t.Stop()
	for {
		v.refreshOnce()
		select {
		case <-v.c.stop:
			return
		case <-t.C:
		case <-v.kick:
		}
	}
}

// refreshOnce reads the set (usually from the client-side cache) and
// publishes a new snapshot when the contents changed or a member expired.
func (v *SetView) refreshOnce() {
	c := v.c
	if c.degraded.Load() {
		return // keep the last contents; the prober watches Redis
	}
	rc := c.redis()
	if rc == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.o.ConnTimeout)
	res := rc.DoCache(ctx, rc.B().Zrange().Key(v.key).Min("0").Max("-1").Withscores().Cache(), c.o.CacheTTL)
	cancel()
	v.reads.Add(1)
	zs, err := res.AsZScores()
	if err != nil {
		if re, ok := rueidis.IsRedisErr(err); ok {
			if msg := re.Error(); msg != v.lastErr { // e.g. WRONGTYPE: log once
				v.lastErr = msg
				c.log.Warn("reading watched set", zap.String("key", v.key), zap.Error(err))
			}
			return
		}
		c.markDegraded("reading watched set "+v.key, err)
		return
	}
	v.lastErr = ""
	now := time.Now()
	if res.IsCacheHit() && v.loaded {
		// Unchanged in Redis (no invalidation arrived): only expiry can
		// change the contents.
		if v.nextExp != 0 && now.UnixMilli() >= v.nextExp {
			v.publish(now, now)
		} else {
			v.snap.Store(&setSnap{m: v.snap.Load().m, updated: now})
		}
		return
	}
	if !res.IsCacheHit() {
		v.fetches.Add(1)
	}
	v.entries = v.entries[:0]
	for _, z := range zs {
		v.entries = append(v.entries, setEntry{member: z.Member, exp: int64(z.Score)})
	}
	v.publish(now, now)
	if !v.loaded {
		v.loaded = true
		close(v.ready)
	}
}

// publish stores a snapshot of the entries not expired at now.
func (v *SetView) publish(now, updated time.Time) {
	ms := now.UnixMilli()
	m := make(map[string]int64, len(v.entries))
	var next int64
	for _, e := range v.entries {
		if e.exp <= ms {
			continue
		}
		m[e.member] = e.exp
		if next == 0 || e.exp < next {
			next = e.exp
		}
	}
	v.nextExp = next
	v.snap.Store(&setSnap{m: m, updated: updated})
}

// AddToSet adds member to the sorted set at key for ttl (e.g. revokes a
// token id until it would have expired anyway). Every node's view of key
// sees it within a round trip or two, and at the latest after one refresh
// interval. Bounded by ConnTimeout; not for the request path.
func (c *Client) AddToSet(key, member string, ttl time.Duration) error {
	if ttl <= 0 {
		return ErrBadTTL
	}
	rc, err := c.ready()
	if err != nil {
		return err
	}
	now := time.Now()
	ttlMS := int64((ttl + time.Millisecond - 1) / time.Millisecond)
	args := []string{
		member,
		strconv.FormatInt(now.UnixMilli()+ttlMS, 10),
		strconv.FormatInt(now.UnixMilli(), 10),
		strconv.FormatInt(ttlMS, 10),
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.o.ConnTimeout)
	defer cancel()
	return c.writeErr("adding to "+key, addScript.Exec(ctx, rc, []string{key}, args).Error())
}

// RemoveFromSet removes member from the sorted set at key (undoes
// AddToSet). Bounded by ConnTimeout; not for the request path.
func (c *Client) RemoveFromSet(key, member string) error {
	rc, err := c.ready()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.o.ConnTimeout)
	defer cancel()
	return c.writeErr("removing from "+key, rc.Do(ctx, rc.B().Zrem().Key(key).Member(member).Build()).Error())
}

// ready returns the rueidis client for an off-path write, or why not.
func (c *Client) ready() (rueidis.Client, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if c.degraded.Load() {
		return nil, ErrDegraded
	}
	return c.redis(), nil
}

// writeErr wraps an off-path write's error; connection failures (not
// Redis error replies) put the Client in degraded mode and match
// ErrDegraded.
func (c *Client) writeErr(what string, err error) error {
	if err == nil {
		c.answered.Store(time.Now().UnixNano())
		return nil
	}
	if _, ok := rueidis.IsRedisErr(err); ok {
		return fmt.Errorf("cluster: %s: %w", what, err)
	}
	c.markDegraded(what, err)
	return fmt.Errorf("%w: %s: %w", ErrDegraded, what, err)
}

// onInvalidations is rueidis's push callback (its reader goroutine: keep
// it short). A nil list means the whole cache was dropped (flush or a
// closed connection).
func (c *Client) onInvalidations(keys []rueidis.RedisMessage) {
	if keys == nil {
		c.kickViews()
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range keys {
		if k, err := keys[i].ToString(); err == nil {
			c.pokeKey(k)
			if v := c.views[k]; v != nil {
				v.poke()
			}
		}
	}
}

func (c *Client) kickViews() {
	c.pokeKeys()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.views {
		v.poke()
	}
}
