package cluster

import (
	"sync/atomic"
	"time"
)

// NodesKey is the sorted set holding cluster membership: members are node
// ids, scores their heartbeat expiry (see the storage format in set.go).
const NodesKey = "tollgate:nodes"

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
// an expiry of 3 × every, and watches the membership so LiveNodes can
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
				_ = c.AddToSet(NodesKey, nodeID, 3*every) // a failure marks the client degraded
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
