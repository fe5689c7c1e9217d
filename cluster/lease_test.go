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
	emptied := time.Now() // the bucket refills from here, 10 a second
	if out[0].Granted != 2 || out[0].Wait < 790*time.Millisecond || out[0].Wait > 810*time.Millisecond {
		t.Fatalf("second: %+v, want 2 granted and 0.8 s until 8 more", out[0])
	}
	r.Want, r.Spent = 0, -6 // tokens given back
	out = lease(t, c, r)
	refilled := 10 * time.Since(emptied).Seconds()
	if out[0].Granted != 0 || out[0].Level < 5.9 || out[0].Level > 6.1+refilled {
		t.Fatalf("give back: %+v, want 6 and %.2f refilled at most", out[0], refilled)
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
	next := time.Now().Add(out[0].WindowLeft)
	time.Sleep(time.Until(next) + 20*time.Millisecond) // into the next window: most of the previous still counts
	out = lease(t, c, sliding)
	// The previous window's 10 count in proportion to what is left of
	// it; at 20 ms in, 9 of them. A slow host answers later, and the
	// test allows for the time it measured.
	into := time.Since(next)
	most := int64(10*into/(200*time.Millisecond)) + 2
	if out[0].Granted < 1 || out[0].Granted > most {
		t.Fatalf("sliding, %v into the next window: %+v, want 1..%d", into, out[0], most)
	}
}

// TestLeaseLeakyBucket: a leaky bucket's leases are runs of the one
// schedule's slots, one every per/limit, none beyond the capacity.
// Slots are fixed on Redis's clock, so what a later lease sees is its
// offset from the first slot less the time since the first lease; the
// test brackets that time by its own clock rather than assume it is
// small (a slow or raced host takes tens of milliseconds per call).
func TestLeaseLeakyBucket(t *testing.T) {
	rd := testutil.StartRedis(t)
	c := newClient(t, rd.Addr)
	lb := LeaseRequest{Key: "tollgate:rl:l:{k}", Alg: LeaseLeakyBucket, Limit: 10, Per: time.Second, Burst: 5, Want: 3, TTL: 2 * time.Second}
	const slack = 5 * time.Millisecond // rounding to µs and the two clocks' reading
	// ahead checks a duration the schedule puts at offset from the first
	// slot, seen by a lease sent after since(first lease answered) and
	// answered before since(first lease sent).
	var sent, answered time.Time
	ahead := func(got, offset time.Duration, sentAfter time.Time) bool {
		lo := offset - time.Since(sent) - slack
		hi := offset - sentAfter.Sub(answered) + slack
		return got >= lo && got <= hi
	}
	µs := func(level float64) time.Duration { return time.Duration(level) * time.Microsecond }

	sent = time.Now()
	out := lease(t, c, lb)
	answered = time.Now()
	if out[0].Granted != 3 || math.Abs(out[0].Level) > float64(slack/time.Microsecond) {
		t.Fatalf("first run: %+v, want slots 0, 100, 200 ms", out[0])
	}
	second := time.Now()
	out = lease(t, c, lb) // another node: the next slots, up to 400 ms ahead
	if out[0].Granted != 2 || !ahead(µs(out[0].Level), 300*time.Millisecond, second) ||
		!ahead(out[0].Wait, 100*time.Millisecond, second) {
		t.Fatalf("second run: %+v after %v, want slots 300, 400 ms and the next fitting at 100 ms",
			out[0], time.Since(sent))
	}
	r := lb
	r.Want, r.Spent = 1, 2 // two released ahead of a lease take two slots
	third := time.Now()
	out = lease(t, c, r)
	if out[0].Granted != 0 || !ahead(out[0].Wait, 300*time.Millisecond, third) {
		t.Fatalf("full: %+v after %v, want none and the next fitting at 300 ms", out[0], time.Since(sent))
	}
	time.Sleep(time.Until(sent.Add(900 * time.Millisecond))) // the schedule drains by Redis's clock
	r.Spent = 0
	out = lease(t, c, r)
	if out[0].Granted != 1 || math.Abs(out[0].Level) > float64(slack/time.Microsecond) {
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
