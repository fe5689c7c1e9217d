package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
)

func TestNodeStatusRoundTrip(t *testing.T) {
	now := time.UnixMilli(1700000000000)
	in := NodeInfo{Addr: "10.0.0.1:8080", ConfigVersion: 7, Started: now.Add(-time.Hour), LastError: "config v8:3:1: bad\nthing"}
	v := formatLoad(now, Load{QPS: 12.5}) + " " + formatStatus(in)
	s, ok := parseStatus("n1", v)
	if !ok || s.Addr != in.Addr || s.ConfigVersion != 7 || !s.Started.Equal(in.Started) ||
		s.LastError != "config v8:3:1: bad thing" || s.QPS != 12.5 {
		t.Fatalf("parsed %+v from %q", s, v)
	}
	if l, ok := parseLoad("n1", v); !ok || l.QPS != 12.5 {
		t.Fatalf("the load entry is no longer readable by parseLoad: %+v", l)
	}
	old, ok := parseStatus("n2", formatLoad(now, Load{}))
	if !ok || old.ConfigVersion != 0 || old.Addr != "" {
		t.Fatalf("an entry without status: %+v", old)
	}
	long := formatStatus(NodeInfo{LastError: strings.Repeat("x", 2000)})
	if len(long) > maxStatusError+40 {
		t.Fatalf("error not bounded: %d bytes", len(long))
	}
}

func TestHeartbeatCarriesNodeStatus(t *testing.T) {
	rd := testutil.StartRedis(t)
	c := newClient(t, rd.Addr)
	c.ReportCounts(func() Counts { return Counts{} })
	c.ReportStatus(func() NodeInfo { return NodeInfo{Addr: "a:1", ConfigVersion: 9, Started: time.Now()} })
	c.Heartbeat("n1", 100*time.Millisecond)
	deadline := time.Now().Add(3 * time.Second)
	for {
		st, err := c.NodeStatuses(context.Background())
		if err == nil && len(st) == 1 && st[0].Node == "n1" && st[0].ConfigVersion == 9 && st[0].Addr == "a:1" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("statuses %+v %v", st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
