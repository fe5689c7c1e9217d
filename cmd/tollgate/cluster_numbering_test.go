package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cluster"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/testutil"
)

// TestStatusSaysAheadOfAnEmptiedRedis: a node running version 4 of a
// Redis since emptied is ahead of it, not behind; one below the current
// version is behind.
func TestStatusSaysAheadOfAnEmptiedRedis(t *testing.T) {
	rd := testutil.StartRedis(t)
	node, err := cluster.New(cluster.Options{Addrs: []string{rd.Addr}, Budget: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	node.ReportCounts(func() cluster.Counts { return cluster.Counts{} })
	node.ReportStatus(func() cluster.NodeInfo {
		return cluster.NodeInfo{Addr: "127.0.0.1:8080", ConfigVersion: 4, Started: time.Now()}
	})
	node.Heartbeat("n1", 100*time.Millisecond)
	cli, err := dialCluster(rd.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := cli.NodeStatuses(context.Background())
		if err == nil && len(st) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node status: %v %v", st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var out bytes.Buffer
	if err := configStatus(cli, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "4 (ahead: redis holds no version") || strings.Contains(out.String(), "behind") {
		t.Fatalf("status of a node ahead of an empty redis:\n%s", out.String())
	}
	for _, tc := range []struct {
		node, current uint64
		want          string
	}{
		{4, 4, "4"}, {3, 4, "3 (behind)"}, {5, 4, "5 (ahead of redis"}, {4, 0, "4 (ahead: redis holds no version"},
	} {
		if got := nodeVersion(tc.node, tc.current); !strings.HasPrefix(got, tc.want) || tc.node == tc.current && got != tc.want {
			t.Errorf("node %d, redis %d: %q, want %q", tc.node, tc.current, got, tc.want)
		}
	}
}

// TestFollowerLogsTheVersionInRedis: a node that starts on version 4 of
// Redis logs 4, the number config push and config status show, though it
// is the first configuration this process loaded.
func TestFollowerLogsTheVersionInRedis(t *testing.T) {
	snap := &config.Snapshot{Version: 1, ClusterVersion: 4}
	if f := logVersion("version", snap); f.Integer != 4 {
		t.Fatalf("logged %d, want 4", f.Integer)
	}
	if f := logVersion("version", &config.Snapshot{Version: 3}); f.Integer != 3 {
		t.Fatalf("a file's snapshot: logged %d, want 3", f.Integer)
	}
}
