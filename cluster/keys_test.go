package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
)

// TestKeyChangesAnnounceWrites: CachedGet is served from the client-side
// cache (30 s here), so only Redis's invalidation, announced on
// KeyChanges, lets a reader see another client's write at once.
func TestKeyChangesAnnounceWrites(t *testing.T) {
	rd := testutil.StartRedis(t)
	c := newClient(t, rd.Addr)
	ctx := context.Background()
	if _, err := c.CachedGet(ctx, "w:{k}"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("missing key: %v, want ErrNoKey", err)
	}
	changes := c.KeyChanges("w:{k}")
	if c.KeyChanges("w:{k}") != changes {
		t.Fatal("two channels for one key")
	}
	for _, v := range []string{"one", "two", "three"} {
		if _, err := rd.Command("SET", "w:{k}", v); err != nil {
			t.Fatal(err)
		}
		select {
		case <-changes:
		case <-time.After(time.Second):
			t.Fatalf("write of %q was not announced", v)
		}
		waitFor(t, time.Second, "the cached read sees "+v, func() bool {
			s, err := c.CachedGet(ctx, "w:{k}")
			return err == nil && s == v
		})
	}
	reads, _ := rd.CommandStat("get")
	for range 20 {
		if s, err := c.CachedGet(ctx, "w:{k}"); err != nil || s != "three" {
			t.Fatalf("cached read: %q %v", s, err)
		}
	}
	if n, _ := rd.CommandStat("get"); n != reads {
		t.Fatalf("unchanged key read from redis %d times, want 0", n-reads)
	}
}

func TestHashReads(t *testing.T) {
	rd := testutil.StartRedis(t)
	c := newClient(t, rd.Addr)
	ctx := context.Background()
	if m, err := c.HashFields(ctx, "h"); err != nil || len(m) != 0 {
		t.Fatalf("missing hash: %v %v", m, err)
	}
	if _, err := rd.Command("HSET", "h", "a", "1", "b", "2"); err != nil {
		t.Fatal(err)
	}
	if s, err := c.HashField(ctx, "h", "b"); err != nil || s != "2" {
		t.Fatalf("HashField: %q %v", s, err)
	}
	if _, err := c.HashField(ctx, "h", "c"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("missing field: %v, want ErrNoKey", err)
	}
	if m, err := c.HashFields(ctx, "h"); err != nil || len(m) != 2 || m["a"] != "1" {
		t.Fatalf("HashFields: %v %v", m, err)
	}
}
