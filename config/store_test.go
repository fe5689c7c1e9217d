package config

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cluster"
	"github.com/tollgate/tollgate/internal/testutil"
)

// storeClient is a healthy client of the Redis at addr.
func storeClient(t *testing.T, addr string) *cluster.Client {
	t.Helper()
	c, err := cluster.New(cluster.Options{Addrs: []string{addr}, NodeID: "store-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if !c.Healthy() {
		t.Fatal("redis did not answer")
	}
	return c
}

func pushText(t *testing.T, st Store, text string, keep int, floor uint64) uint64 {
	t.Helper()
	d := StoredConfig{StoredVersion: StoredVersion{Digest: "d-" + strings.TrimSpace(text)}, Author: "ops\tteam", At: time.UnixMilli(1700000000000), Text: []byte(text)}
	v, err := st.Push(context.Background(), d, keep, floor)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestPushConfigNumbersKeepsAndAnnounces(t *testing.T) {
	rd := testutil.StartRedis(t)
	st := NewStore(storeClient(t, rd.Addr))
	ctx := context.Background()
	if _, err := st.Current(ctx); !errors.Is(err, ErrNotStored) {
		t.Fatalf("empty redis: %v, want ErrNotStored", err)
	}
	changes := st.Changes()
	for i, text := range []string{"one\n", "two\n", "three\n"} {
		if v := pushText(t, st, text, 2, 0); v != uint64(i+1) {
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
			cur, err := st.Current(ctx)
			if err == nil && cur.Version == uint64(i+1) && cur.Digest == "d-"+strings.TrimSpace(text) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("current after push %d: %+v %v", i+1, cur, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	docs, err := st.Versions(ctx)
	if err != nil || len(docs) != 2 || docs[0].Version != 2 || docs[1].Version != 3 {
		t.Fatalf("kept %+v %v, want versions 2 and 3", docs, err)
	}
	d, err := st.Get(ctx, 0)
	if err != nil || string(d.Text) != "three\n" || d.Author != "ops team" || d.At.UnixMilli() != 1700000000000 {
		t.Fatalf("current doc %+v %v", d, err)
	}
	if _, err := st.Get(ctx, 1); !errors.Is(err, ErrNotStored) {
		t.Fatalf("version 1 should be gone: %v", err)
	}
	// A Redis that lost its data counts on above what nodes run.
	if _, err := rd.Command("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	if v := pushText(t, st, "four\n", 2, 40); v != 41 {
		t.Fatalf("push above floor 40 got version %d", v)
	}
	if v := pushText(t, st, "five\n", 2, 40); v != 42 {
		t.Fatalf("next push got version %d", v)
	}
}
