package cluster

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
)

func lease(t *testing.T, c *Client, reqs ...LeaseRequest) []LeaseResult {
	t.Helper()
	out := make([]LeaseResult, len(reqs))
	if err := c.Lease(time.Second, reqs, out); err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o.Err != nil {
			t.Fatalf("request %d: %v", i, o.Err)
		}
	}
	return out
}

// TestLeaseTokenBucket checks the script's token bucket against Redis:
// grants up to the burst, debt deducted, tokens given back, refill by
// Redis's clock, and the key's expiry.
func TestLeaseTokenBucket(t *testing.T) {
	rd := testutil.StartRedis(t)
	c := newClient(t, rd.Addr)
	tb := LeaseRequest{Key: "tollgate:rl:t:{k}", Alg: LeaseTokenBucket, Limit: 10, Per: time.Second, Burst: 20, TTL: 3 * time.Second}
	r := tb
	r.Want = 15
	out := lease(t, c, r)
	if out[0].Granted != 15 || out[0].Level < 4.9 || out[0].Level > 5.1 {
		t.Fatalf("first lease of a fresh bucket: %+v", out[0])
	}
	r.Want, r.Spent = 10, 3 // three admitted ahead of this lease
	out = lease(t, c, r)
	if out[0].Granted != 2 || out[0].Wait < 790*time.Millisecond || out[0].Wait > 810*time.Millisecond {
		t.Fatalf("second: %+v, want 2 granted and 0.8 s until 8 more", out[0])
	}
	r.Want, r.Spent = 0, -6 // tokens given back
	out = lease(t, c, r)
	if out[0].Granted != 0 || out[0].Level < 5.9 || out[0].Level > 6.5 {
		t.Fatalf("give back: %+v", out[0])
	}
	time.Sleep(300 * time.Millisecond) // Redis refills by its own clock
	r.Want, r.Spent = 100, 0
	out = lease(t, c, r)
	if out[0].Granted < 8 || out[0].Granted > 10 {
		t.Fatalf("after 300ms: %+v, want 6 + 3 granted", out[0])
	}
	ttl, err := rd.Command("PTTL", r.Key)
	if n, _ := strconv.Atoi(ttl); err != nil || n <= 2000 || n > 3000 {
		t.Fatalf("PTTL %s %v", ttl, err)
	}
	// Debt beyond the bucket: a later lease waits for it to be repaid.
	r.Want, r.Spent = 1, 25
	out = lease(t, c, r)
	if out[0].Granted != 0 || out[0].Level > -19 || out[0].Wait < 2*time.Second {
		t.Fatalf("in debt: %+v", out[0])
	}
}

func TestLeaseWindows(t *testing.T) {
	rd := testutil.StartRedis(t)
	c := newClient(t, rd.Addr)
	// A window long enough that the test never crosses it by accident
	// except where it says so.
	fixed := LeaseRequest{Key: "tollgate:rl:f:{k}", Alg: LeaseFixedWindow, Limit: 10, Per: time.Hour, Want: 6, TTL: 2 * time.Hour}
	out := lease(t, c, fixed, fixed)
	if out[0].Granted != 6 || out[1].Granted != 4 || out[1].Wait != out[1].WindowLeft || out[1].WindowLeft <= 0 {
		t.Fatalf("fixed window: %+v", out)
	}
	sliding := LeaseRequest{Key: "tollgate:rl:s:{k}", Alg: LeaseSlidingWindow, Limit: 10, Per: 200 * time.Millisecond, Want: 10, TTL: time.Second}
	out = lease(t, c, sliding)
	if out[0].Granted != 10 {
		t.Fatalf("sliding, first: %+v", out[0])
	}
	left := out[0].WindowLeft
	time.Sleep(left + 20*time.Millisecond) // into the next window: most of the previous still counts
	out = lease(t, c, sliding)
	if out[0].Granted < 1 || out[0].Granted > 3 {
		t.Fatalf("sliding, 20ms into the next window: %+v, want 1..3", out[0])
	}
}

// TestLeaseLeakyBucket: a leaky bucket's leases are runs of the one
// schedule's slots, one every per/limit, none beyond the capacity.
func TestLeaseLeakyBucket(t *testing.T) {
	rd := testutil.StartRedis(t)
	c := newClient(t, rd.Addr)
	lb := LeaseRequest{Key: "tollgate:rl:l:{k}", Alg: LeaseLeakyBucket, Limit: 10, Per: time.Second, Burst: 5, Want: 3, TTL: 2 * time.Second}
	near := func(got float64, want time.Duration) bool {
		return math.Abs(got-float64(want/time.Microsecond)) < float64(30*time.Millisecond/time.Microsecond)
	}
	out := lease(t, c, lb)
	if out[0].Granted != 3 || !near(out[0].Level, 0) {
		t.Fatalf("first run: %+v, want slots 0, 100, 200 ms", out[0])
	}
	out = lease(t, c, lb) // another node: the next slots, up to 400 ms ahead
	if out[0].Granted != 2 || !near(out[0].Level, 300*time.Millisecond) ||
		out[0].Wait < 70*time.Millisecond || out[0].Wait > 100*time.Millisecond {
		t.Fatalf("second run: %+v, want slots 300, 400 ms and the next fitting in 100 ms", out[0])
	}
	r := lb
	r.Want, r.Spent = 1, 2 // two released ahead of a lease take two slots
	out = lease(t, c, r)
	if out[0].Granted != 0 || out[0].Wait < 270*time.Millisecond || out[0].Wait > 300*time.Millisecond {
		t.Fatalf("full: %+v, want none and 300 ms", out[0])
	}
	time.Sleep(800 * time.Millisecond) // the schedule drains by Redis's clock
	r.Spent = 0
	out = lease(t, c, r)
	if out[0].Granted != 1 || !near(out[0].Level, 0) {
		t.Fatalf("after the queue drained: %+v", out[0])
	}
}

// TestLeaseLoadsTheScriptWhenMissing: after SCRIPT FLUSH (a restarted or
// failed-over Redis) the first call sends the script itself.
func TestLeaseLoadsTheScriptWhenMissing(t *testing.T) {
	rd := testutil.StartRedis(t)
	c := newClient(t, rd.Addr)
	r := LeaseRequest{Key: "tollgate:rl:x:{k}", Limit: 5, Per: time.Second, Burst: 5, Want: 1}
	lease(t, c, r)
	if _, err := rd.Command("SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	if out := lease(t, c, r, r); out[0].Granted != 1 || out[1].Granted != 1 {
		t.Fatalf("after SCRIPT FLUSH: %+v", out)
	}
	// A fresh server had no script either: EVALSHA then EVAL the first
	// time, and both requests again after the flush.
	if n, _ := rd.CommandStat("eval"); n != 3 {
		t.Fatalf("EVAL calls %d, want 3", n)
	}
	if st := c.Stats(); st.Leases != 6 {
		t.Fatalf("lease commands counted %d, want 6", st.Leases)
	}
	// A key of another type is a Redis error for that request only.
	if _, err := rd.Command("HSET", "tollgate:rl:bad:{k}", "f", "x"); err != nil {
		t.Fatal(err)
	}
	out := make([]LeaseResult, 2)
	bad := r
	bad.Key = "tollgate:rl:bad:{k}"
	if err := c.Lease(time.Second, []LeaseRequest{bad, r}, out); err != nil {
		t.Fatal(err)
	}
	if out[0].Err == nil || !strings.Contains(out[0].Err.Error(), "WRONGTYPE") || out[1].Err != nil || out[1].Granted != 1 {
		t.Fatalf("mixed batch: %+v", out)
	}
	if !c.Healthy() {
		t.Fatal("a script error degraded the client")
	}
}

func TestLeaseWhileDegraded(t *testing.T) {
	rd := testutil.StartRedis(t)
	c := newClient(t, rd.Addr)
	rd.Kill()
	r := []LeaseRequest{{Key: "tollgate:rl:y:{k}", Limit: 5, Per: time.Second, Burst: 5, Want: 1}}
	out := make([]LeaseResult, 1)
	waitFor(t, 3*time.Second, "a failed lease degrades the client", func() bool {
		err := c.Lease(200*time.Millisecond, r, out)
		return errors.Is(err, ErrDegraded)
	})
	start := time.Now()
	if err := c.Lease(time.Second, r, out); !errors.Is(err, ErrDegraded) || time.Since(start) > 50*time.Millisecond {
		t.Fatalf("lease while degraded: %v after %v", err, time.Since(start))
	}
}
