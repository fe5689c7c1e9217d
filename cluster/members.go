package cluster

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// NodesKey is the sorted set every node watches for the membership:
// members are node ids, scores the expiry of their entry (unix ms), in the
// storage format of a watched set (set.go).
const NodesKey = "tollgate:nodes"

// beatsKey holds each node's latest heartbeat expiry. It shares NodesKey's
// hash slot (the tag is NodesKey itself), so one script updates both on a
// Redis Cluster.
const beatsKey = "{" + NodesKey + "}:beats"

// Heartbeats go to beatsKey, which nobody caches: a write to the watched
// NodesKey would make Redis invalidate every node's cached copy, and every
// node would read the set again after every heartbeat of every node. The
// watched set changes only when the membership does: a node enters it
// (with an entry good for memberHold) when it is not there or its entry
// is past half its life, and the first heartbeat of any node after
// another's heartbeat expired takes the dead node out of both keys. So a
// steady cluster costs Redis one script run per node per heartbeat and no
// reads; a node's death reaches every node within a heartbeat of its
// expiry. If every node dies, the entries expire by themselves.
var beatScript = rueidis.NewLuaScript(`
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[2])
if #dead > 0 then
  redis.call('ZREM', KEYS[2], unpack(dead))
  redis.call('ZREM', KEYS[1], unpack(dead))
end
local cur = redis.call('ZSCORE', KEYS[1], ARGV[1])
if (not cur) or tonumber(cur) < tonumber(ARGV[5]) then
  redis.call('ZADD', KEYS[1], ARGV[4], ARGV[1])
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
  redis.call('PEXPIRE', KEYS[2], ARGV[6])
end
return #dead
`)

// memberHold is how long a node's entry in the watched set lasts; it is
// renewed at half that. Only a cluster that died whole relies on it.
const memberHold = 30 * time.Second

// beat records one heartbeat of id, good for 3 × every.
func (c *Client) beat(id string, every time.Duration) error {
	rc, err := c.ready()
	if err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	hold := memberHold.Milliseconds()
	args := []string{
		id,
		strconv.FormatInt(now, 10),
		strconv.FormatInt(now+3*every.Milliseconds(), 10),
		strconv.FormatInt(now+hold, 10),
		strconv.FormatInt(now+hold/2, 10),
		strconv.FormatInt(hold, 10),
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.o.ConnTimeout)
	defer cancel()
	return c.writeErr("heartbeat", beatScript.Exec(ctx, rc, []string{NodesKey, beatsKey}, args).Error())
}

// leave takes id out of the membership at once (a clean shutdown).
func (c *Client) leave(rc rueidis.Client, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), c.o.ProbeTimeout)
	defer cancel()
	for _, r := range rc.DoMulti(ctx,
		rc.B().Zrem().Key(beatsKey).Member(id).Build(),
		rc.B().Zrem().Key(NodesKey).Member(id).Build()) {
		if r.Error() != nil {
			return
		}
	}
}

type membership struct {
	id    string
	view  *SetView
	every time.Duration
	beat  chan struct{} // capacity 1: heartbeat now
	// After an outage, every node's heartbeat may have expired in Redis
	// while none could renew it: the first reads would count only the
	// nodes that already beat again. LiveNodes keeps reporting the count
	// known before the outage (held) until every node has had time to
	// beat (holdUntil, unix ns).
	held, holdUntil atomic.Int64
}

// Heartbeat announces this node as alive every `every` (default 1s) with
// an expiry of 3 × every (see beatScript), and watches the membership so LiveNodes can
// answer without Redis. nodeID "" means Options.NodeID. Only the first
// call has an effect. Close removes the node from the membership.
func (c *Client) Heartbeat(nodeID string, every time.Duration) {
	if every <= 0 {
		every = time.Second
	}
	if nodeID == "" {
		nodeID = c.o.NodeID
	}
	view := c.WatchSet(NodesKey, 0)
	m := &membership{id: nodeID, view: view, every: every, beat: make(chan struct{}, 1)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() || !c.member.CompareAndSwap(nil, m) {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if c.Healthy() {
				_ = c.beat(nodeID, every) // a failure marks the client degraded
			}
			select {
			case <-c.stop:
				return
			case <-t.C:
			case <-m.beat:
			}
		}
	}()
}

// membersRecovered runs when Redis answers again, before the views
// refresh: it holds the node count known before the outage for three
// heartbeats, and makes this node beat at once.
func (c *Client) membersRecovered() {
	m := c.member.Load()
	if m == nil {
		return
	}
	m.held.Store(int64(c.liveNodes(m)))
	m.holdUntil.Store(time.Now().Add(3*m.every + DefaultRefresh).UnixNano())
	select {
	case m.beat <- struct{}{}:
	default:
	}
}

// LiveNodes is the number of nodes whose heartbeat has not expired,
// counting this node even when Redis never saw it, so it is at least 1.
// Before Heartbeat it is 1. It reads the local view only; while Redis is
// unavailable it keeps the last known count, and for three heartbeats
// after Redis answers again it reports at least that count (the nodes'
// heartbeats lapsed during the outage and come back one by one).
func (c *Client) LiveNodes() int {
	m := c.member.Load()
	if m == nil {
		return 1
	}
	n := c.liveNodes(m)
	if u := m.holdUntil.Load(); u != 0 {
		if time.Now().UnixNano() < u {
			return max(n, int(m.held.Load()))
		}
		m.holdUntil.Store(0)
	}
	return n
}

func (c *Client) liveNodes(m *membership) int {
	n := m.view.Len()
	if !m.view.HasString(m.id) {
		n++
	}
	return n
}
