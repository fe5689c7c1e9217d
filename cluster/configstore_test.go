package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
)

func pushText(t *testing.T, c *Client, text string, keep int, floor uint64) uint64 {
	t.Helper()
	d := ConfigDoc{ConfigVersion: ConfigVersion{Digest: "d-" + strings.TrimSpace(text)}, Author: "ops\tteam", At: time.UnixMilli(1700000000000), Text: []byte(text)}
	v, err := c.PushConfig(context.Background(), d, keep, floor)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestPushConfigNumbersKeepsAndAnnounces(t *testing.T) {
	rd := testutil.StartRedis(t)
	c := newClient(t, rd.Addr)
	ctx := context.Background()
	if _, err := c.CurrentConfig(ctx); !errors.Is(err, ErrNoConfig) {
		t.Fatalf("empty redis: %v, want ErrNoConfig", err)
	}
	changes := c.ConfigChanges()
	for i, text := range []string{"one\n", "two\n", "three\n"} {
		if v := pushText(t, c, text, 2, 0); v != uint64(i+1) {
			t.Fatalf("push %d got version %d", i+1, v)
		}
		// The read is cached for 30 s: only Redis's invalidation of the
		// cached copy lets it see the push.
		select {
		case <-changes:
		case <-time.After(time.Second):
			t.Fatalf("push %d was not announced", i+1)
		}
		deadline := time.Now().Add(time.Second)
		for {
			cur, err := c.CurrentConfig(ctx)
			if err == nil && cur.Version == uint64(i+1) && cur.Digest == "d-"+strings.TrimSpace(text) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("current after push %d: %+v %v", i+1, cur, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	docs, err := c.ConfigVersions(ctx)
	if err != nil || len(docs) != 2 || docs[0].Version != 2 || docs[1].Version != 3 {
		t.Fatalf("kept %+v %v, want versions 2 and 3", docs, err)
	}
	d, err := c.ConfigDoc(ctx, 0)
	if err != nil || string(d.Text) != "three\n" || d.Author != "ops team" || d.At.UnixMilli() != 1700000000000 {
		t.Fatalf("current doc %+v %v", d, err)
	}
	if _, err := c.ConfigDoc(ctx, 1); !errors.Is(err, ErrNoConfig) {
		t.Fatalf("version 1 should be gone: %v", err)
	}
	// A Redis that lost its data counts on above what nodes run.
	if _, err := rd.Command("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	if v := pushText(t, c, "four\n", 2, 40); v != 41 {
		t.Fatalf("push above floor 40 got version %d", v)
	}
	if v := pushText(t, c, "five\n", 2, 40); v != 42 {
		t.Fatalf("next push got version %d", v)
	}
}

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
