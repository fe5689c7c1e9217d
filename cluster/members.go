package cluster

import "time"

// NodesKey is the sorted set holding cluster membership: members are node
// ids, scores their heartbeat expiry (see the storage format in set.go).
const NodesKey = "tollgate:nodes"

type membership struct {
	id   string
	view *SetView
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
	m := &membership{id: nodeID, view: view}
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
			}
		}
	}()
}

// LiveNodes is the number of nodes whose heartbeat has not expired,
// counting this node even when Redis never saw it, so it is at least 1.
// Before Heartbeat it is 1. It reads the local view only; while Redis is
// unavailable it keeps the last known count.
func (c *Client) LiveNodes() int {
	m := c.member.Load()
	if m == nil {
		return 1
	}
	n := m.view.Len()
	if !m.view.HasString(m.id) {
		n++
	}
	return n
}
