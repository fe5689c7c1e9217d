package cluster

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"
)

// NodeInfo is what a node says about itself beyond its traffic: where it
// listens, the configuration version it runs, since when it runs, and the
// last configuration it refused ("" for none).
type NodeInfo struct {
	Addr          string
	ConfigVersion uint64
	Started       time.Time
	LastError     string
}

// ReportStatus makes every heartbeat that reports the node's load (see
// ReportCounts) also carry info(), appended to the same statsKey entry: no
// Redis command of its own. info is called from the heartbeat goroutine;
// it must be cheap and safe for concurrent use. Only the first call has an
// effect.
func (c *Client) ReportStatus(info func() NodeInfo) {
	c.status.CompareAndSwap(nil, &info)
}

// formatStatus appends to a load entry: " <addr> <config version> <started
// unix ms> <last error>". The error is last because it has spaces; it is
// kept to one line and to maxStatusError bytes.
func formatStatus(i NodeInfo) string {
	addr := i.Addr
	if addr == "" || strings.ContainsAny(addr, " \t\r\n") {
		addr = "-"
	}
	msg := strings.Join(strings.Fields(i.LastError), " ")
	if len(msg) > maxStatusError {
		msg = msg[:maxStatusError]
	}
	return addr + " " + strconv.FormatUint(i.ConfigVersion, 10) + " " + strconv.FormatInt(i.Started.UnixMilli(), 10) + " " + msg
}

// maxStatusError bounds the error a heartbeat carries, which every
// heartbeat rewrites.
const maxStatusError = 512

// parseStatus reads a statsKey entry; an entry of a node that reports no
// status has the load only.
func parseStatus(node, v string) (NodeStatus, bool) {
	l, ok := parseLoad(node, v)
	if !ok {
		return NodeStatus{}, false
	}
	s := NodeStatus{NodeLoad: l}
	f := strings.SplitN(v, " ", 8)
	if len(f) < 7 {
		return s, true
	}
	if f[4] != "-" {
		s.Addr = f[4]
	}
	s.ConfigVersion, _ = strconv.ParseUint(f[5], 10, 64)
	if ms, err := strconv.ParseInt(f[6], 10, 64); err == nil {
		s.Started = time.UnixMilli(ms)
	}
	if len(f) == 8 {
		s.LastError = f[7]
	}
	return s, true
}

// NodeStatus is what a node reports about itself with its heartbeat.
type NodeStatus struct {
	NodeLoad
	Addr          string    `json:"addr"`
	ConfigVersion uint64    `json:"config_version"`
	Started       time.Time `json:"started"`
	LastError     string    `json:"last_error,omitempty"`
}

// NodeStatuses reads every live node's status (one Redis command): the
// nodes that heartbeat (cluster.nodes: auto).
func (c *Client) NodeStatuses(ctx context.Context) ([]NodeStatus, error) {
	rc, err := c.ready()
	if err != nil {
		return nil, err
	}
	m, err := rc.Do(ctx, rc.B().Hgetall().Key(statsKey).Build()).AsStrMap()
	if err = c.writeErr("reading node statuses", err); err != nil {
		return nil, err
	}
	oldest := time.Now().Add(-3 * time.Second)
	out := make([]NodeStatus, 0, len(m))
	for node, v := range m {
		if s, ok := parseStatus(node, v); ok && !s.At.Before(oldest) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b NodeStatus) int { return strings.Compare(a.Node, b.Node) })
	return out, nil
}
