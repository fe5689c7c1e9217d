package cluster

import (
	"context"
	"slices"
	"strconv"
	"strings"
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

// statsKey holds each live node's recent traffic (see ReportCounts): field
// the node id, value "<unix ms written> <req/s> <4xx/s> <5xx/s>". It shares
// NodesKey's hash slot too, so the heartbeat script that writes a node's
// entry is also the one that deletes the entries of dead nodes, and the
// figures need no Redis call of their own.
const statsKey = "{" + NodesKey + "}:stats"

// Heartbeats go to beatsKey, which nobody caches: a write to the watched
// NodesKey would make Redis invalidate every node's cached copy, and every
// node would read the set again after every heartbeat of every node. The
// watched set changes only when the membership does: a node enters it
// (with an entry good for memberHold) when it was not in beatsKey (its
// first heartbeat, or its entries were taken out as dead, or Redis lost
// them) or when it asks to (ARGV[5] = "1": the node renews its entry at
// half its life, and knows when it last did), and the first heartbeat of
// any node after another's heartbeat expired takes the dead node out of
// every key. So a steady cluster costs Redis one script run per node per
// heartbeat and no reads; a node's death reaches every node within a
// heartbeat of its expiry. If every node dies, the entries expire by
// themselves. A node that reports its traffic writes it to statsKey in the
// same run (ARGV[7], empty for none). The script returns 1 when it wrote
// the node's entry in the watched set.
//
// A steady heartbeat runs ZADD, HSET and ZRANGEBYSCORE: Redis counts each
// command a script runs, and the project holds all Redis commands to a
// tenth of the requests, so the node's own entry is not read back (the ZADD
// reply says whether it was there) to make room for the HSET.
var beatScript = rueidis.NewLuaScript(`
local fresh = redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
if ARGV[7] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[7])
end
local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[2])
if #dead > 0 then
  redis.call('ZREM', KEYS[2], unpack(dead))
  redis.call('ZREM', KEYS[1], unpack(dead))
  redis.call('HDEL', KEYS[3], unpack(dead))
end
if fresh == 1 or ARGV[5] == '1' then
  redis.call('ZADD', KEYS[1], ARGV[4], ARGV[1])
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
  redis.call('PEXPIRE', KEYS[2], ARGV[6])
  redis.call('PEXPIRE', KEYS[3], ARGV[6])
  return 1
end
return 0
`)

// defaultMemberHold is how long a node's entry in the watched set lasts;
// it is renewed at half that. Only a cluster that died whole relies on it.
// Each Client keeps its own copy (Client.memberHold) so that a test can see
// a renewal without waiting 15 s, without writing what another client's
// background loop reads.
const defaultMemberHold = 30 * time.Second

// beat records one heartbeat of id, good for 3 × every, with the node's
// load entry (statsKey's format; "" for none). renew asks for the node's
// entry in the watched set to be written again; entered reports whether
// it was (asked, or the node was not known).
func (c *Client) beat(id string, every time.Duration, load string, renew bool) (entered bool, err error) {
	rc, err := c.ready()
	if err != nil {
		return false, err
	}
	now := time.Now().UnixMilli()
	hold := c.memberHold.Milliseconds()
	flag := "0"
	if renew {
		flag = "1"
	}
	args := []string{
		id,
		strconv.FormatInt(now, 10),
		strconv.FormatInt(now+3*every.Milliseconds(), 10),
		strconv.FormatInt(now+hold, 10),
		flag,
		strconv.FormatInt(hold, 10),
		load,
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.o.ConnTimeout)
	defer cancel()
	n, err := beatScript.Exec(ctx, rc, []string{NodesKey, beatsKey, statsKey}, args).AsInt64()
	return n == 1, c.writeErr("heartbeat", err)
}

// leave takes id out of the membership at once (a clean shutdown).
func (c *Client) leave(rc rueidis.Client, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), c.o.ProbeTimeout)
	defer cancel()
	for _, r := range rc.DoMulti(ctx,
		rc.B().Zrem().Key(beatsKey).Member(id).Build(),
		rc.B().Zrem().Key(NodesKey).Member(id).Build(),
		rc.B().Hdel().Key(statsKey).Field(id).Build()) {
		if r.Error() != nil {
			return
		}
	}
}

// Counts are a node's running totals of answered requests, as the gateway
// counts them anyway; each heartbeat turns their growth into a Load.
type Counts struct {
	Requests   uint64
	C4xx, C5xx uint64 // of them, answered 4xx and 5xx
}

// Load is a node's recent traffic, per second.
type Load struct {
	QPS  float64 `json:"qps"`
	R4xx float64 `json:"r4xx"`
	R5xx float64 `json:"r5xx"`
}

// NodeLoad is the Load a node reported with its last heartbeat.
type NodeLoad struct {
	Node string    `json:"node"`
	At   time.Time `json:"at"` // when the node wrote it (its clock)
	Load
}

// loadSource turns the counts a node keeps into the Load each heartbeat
// reports; only the heartbeat goroutine calls next.
type loadSource struct {
	counts func() Counts
	prev   Counts
	prevAt time.Time
}

// next returns the load entry for a heartbeat at now: the counts' growth
// since the previous entry, per second. A heartbeat less than half a
// period after it (the first, or one right after a late one) writes none:
// rates over so short a time are mostly rounding, and the entry before
// stays fresh enough.
func (s *loadSource) next(now time.Time, every time.Duration) string {
	secs := now.Sub(s.prevAt).Seconds()
	if secs < (every / 2).Seconds() {
		return ""
	}
	cur := s.counts()
	prev := s.prev
	s.prev, s.prevAt = cur, now
	rate := func(c, p uint64) float64 {
		if c < p {
			return 0
		}
		return float64(c-p) / secs
	}
	return formatLoad(now, Load{QPS: rate(cur.Requests, prev.Requests), R4xx: rate(cur.C4xx, prev.C4xx), R5xx: rate(cur.C5xx, prev.C5xx)})
}

func formatLoad(at time.Time, l Load) string {
	b := strconv.AppendInt(make([]byte, 0, 48), at.UnixMilli(), 10)
	for _, v := range [...]float64{l.QPS, l.R4xx, l.R5xx} {
		b = append(b, ' ')
		b = strconv.AppendFloat(b, v, 'f', 2, 64)
	}
	return string(b)
}

// parseLoad reads a statsKey value; fields a later version appends are
// ignored.
func parseLoad(node, v string) (NodeLoad, bool) {
	f := strings.Fields(v)
	if len(f) < 4 {
		return NodeLoad{}, false
	}
	ms, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return NodeLoad{}, false
	}
	var x [3]float64
	for i := range x {
		if x[i], err = strconv.ParseFloat(f[i+1], 64); err != nil || x[i] < 0 {
			return NodeLoad{}, false
		}
	}
	return NodeLoad{Node: node, At: time.UnixMilli(ms), Load: Load{QPS: x[0], R4xx: x[1], R5xx: x[2]}}, true
}

// ReportCounts makes every heartbeat also record this node's Load, from
// the growth of counts between heartbeats, for the other nodes to read
// with NodeLoads. It costs Redis no call of its own: the heartbeat script
// writes it (one HSET). counts is called once a heartbeat, from the heartbeat
// goroutine; it must be cheap and safe for concurrent use. It may be
// called before or after Heartbeat; only the first call has an effect.
func (c *Client) ReportCounts(counts func() Counts) {
	c.loads.CompareAndSwap(nil, &loadSource{counts: counts, prev: counts(), prevAt: time.Now()})
}

// NodeLoads reads the Load every node reported, leaving out entries not
// renewed for three heartbeats (a node that stopped without leaving; the
// heartbeats of the others delete its entry soon after). It costs one
// Redis command, waits at most ProbeTimeout, and is meant for an operator
// asking (the dashboard), never for requests. It returns ErrDegraded at
// once while Redis is unavailable.
func (c *Client) NodeLoads(ctx context.Context) ([]NodeLoad, error) {
	rc, err := c.ready()
	if err != nil {
		return nil, err
	}
	every := time.Second
	if m := c.member.Load(); m != nil {
		every = m.every
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.ProbeTimeout)
	defer cancel()
	m, err := rc.Do(ctx, rc.B().Hgetall().Key(statsKey).Build()).AsStrMap()
	if err = c.writeErr("reading node loads", err); err != nil {
		return nil, err
	}
	oldest := time.Now().Add(-3 * every)
	out := make([]NodeLoad, 0, len(m))
	for node, v := range m {
		if l, ok := parseLoad(node, v); ok && !l.At.Before(oldest) {
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b NodeLoad) int { return strings.Compare(a.Node, b.Node) })
	return out, nil
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
		var entered time.Time // when this node last wrote its entry in the watched set
		for {
			if c.Healthy() {
				var load string
				now := time.Now()
				if src := c.loads.Load(); src != nil {
					load = src.next(now, every)
				}
				if st := c.status.Load(); st != nil && load != "" {
					load += " " + formatStatus((*st)())
				}
				// A failure marks the client degraded.
				if ok, err := c.beat(nodeID, every, load, now.Sub(entered) >= c.memberHold/2); err == nil && ok {
					entered = now
				}
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
