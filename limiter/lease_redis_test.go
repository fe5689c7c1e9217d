package limiter

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cluster"
	"github.com/tollgate/tollgate/internal/testutil"
)

func lease(t *testing.T, c redisLeaser, reqs ...LeaseRequest) []LeaseResult {
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

// leaseClient is a node's lease protocol on a client of the Redis at
// addr; node "" takes the client's default name.
func leaseClient(t *testing.T, addr, node string) redisLeaser {
	t.Helper()
	c, err := cluster.New(cluster.Options{Addrs: []string{addr}, NodeID: node})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return redisLeaser{c}
}

// waitUntil polls cond until it holds or limit passes.
func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for: %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLeaseTokenBucket checks the script's token bucket against Redis:
// grants up to the burst, debt deducted, tokens given back, refill by
// Redis's clock, and the key's expiry.
func TestLeaseTokenBucket(t *testing.T) {
	rd := testutil.StartRedis(t)
	c := leaseClient(t, rd.Addr, "")
	tb := LeaseRequest{Key: "tollgate:rl:t:{k}", Alg: LeaseTokenBucket, Limit: 10, Per: time.Second, Burst: 20, TTL: 3 * time.Second}
	r := tb
	r.Want = 15
	began := time.Now()
	out := lease(t, c, r)
	if out[0].Granted != 15 || out[0].Level < 4.9 || out[0].Level > 5.1 {
		t.Fatalf("first lease of a fresh bucket: %+v", out[0])
	}
	r.Want, r.Spent = 10, 3 // three admitted ahead of this lease
	out = lease(t, c, r)
	emptied := time.Now() // the bucket refills from here, 10 a second
	// What refilled between the two calls is left over (level), and the
	// wait is for the rest of the 8 tokens not granted. A slow host (the
	// race detector) takes milliseconds per call: bracketed by the test's
	// own clock, not assumed to be nothing.
	between := 10 * emptied.Sub(began).Seconds()
	rest := time.Duration((8 - out[0].Level) * float64(100*time.Millisecond))
	if out[0].Granted != 2 || out[0].Level < 0 || out[0].Level > between+0.01 ||
		out[0].Wait < rest-time.Millisecond || out[0].Wait > rest+time.Millisecond {
		t.Fatalf("second: %+v, want 2 granted, at most %.2f left and the wait for the rest of 8", out[0], between)
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

// TestLeaseLostCounter: a counter Redis no longer holds, asked for by a
// node that has some of it in use, is marked lost; every node then charges
// its in use once, on its first call after the mark. A counter Redis kept,
// and a fresh one no node has used, are never charged it.
func TestLeaseLostCounter(t *testing.T) {
	rd := testutil.StartRedis(t)
	nodeA := leaseClient(t, rd.Addr, "node-a")
	nodeB := leaseClient(t, rd.Addr, "node-b")
	fixed := LeaseRequest{Key: "tollgate:rl:lost:{k}", Alg: LeaseFixedWindow, Limit: 100, Per: time.Hour, TTL: 2 * time.Hour}
	level := func(c redisLeaser, spent, inUse int64) float64 {
		t.Helper()
		r := fixed
		r.Spent, r.InUse = spent, inUse
		return lease(t, c, r)[0].Level
	}
	// A fresh counter no node has used: in use not charged, no mark.
	if lv := level(nodeA, 5, 0); lv != 95 {
		t.Fatalf("fresh: level %v, want 95", lv)
	}
	// Kept: in use is in the counter already.
	if lv := level(nodeA, 2, 40); lv != 93 {
		t.Fatalf("kept: level %v, want 93 (only spent)", lv)
	}
	if n, err := rd.Command("EXISTS", fixed.Key+":lost"); err != nil || n != "0" {
		t.Fatalf("a mark on a counter never lost: %s %v", n, err)
	}
	if _, err := rd.Command("DEL", fixed.Key); err != nil {
		t.Fatal(err)
	}
	// Node A finds it lost: charged its 40 in use, and the mark set.
	if lv := level(nodeA, 1, 40); lv != 60 {
		t.Fatalf("lost, node A: level %v, want 60", lv)
	}
	// Node B, first call since the loss: its 30 in use.
	if lv := level(nodeB, 0, 30); lv != 30 {
		t.Fatalf("lost, node B: level %v, want 30", lv)
	}
	// Each has charged once: only spent from here.
	if lv := level(nodeA, 3, 45); lv != 27 {
		t.Fatalf("node A again: level %v, want 27", lv)
	}
	if lv := level(nodeB, 0, 35); lv != 27 {
		t.Fatalf("node B again: level %v, want 27", lv)
	}
	ttl, err := rd.Command("PTTL", fixed.Key+":lost")
	if n, _ := strconv.Atoi(ttl); err != nil || n <= int(time.Hour.Milliseconds()) {
		t.Fatalf("the mark's PTTL %s %v: want the counter's", ttl, err)
	}

	// A call Redis runs after its in_use_until (held by a frozen server)
	// finds the counter lost, and charges only what it spent.
	if _, err := rd.Command("DEL", fixed.Key, fixed.Key+":lost"); err != nil {
		t.Fatal(err)
	}
	late := fixed
	late.Spent, late.InUse = 4, 50
	past := strconv.FormatInt(time.Now().Add(-time.Second).UnixMicro(), 10)
	eval := append([]string{"EVAL", leaseSource, "2", late.Key, lossMarkKey(late.Key)}, leaseArgs(&late, "node-c", past)...)
	if _, err := rd.Command(eval...); err != nil {
		t.Fatal(err)
	}
	if lv := level(nodeA, 0, 45); lv != 96 {
		t.Fatalf("after a late call: level %v, want 96 (its spent only, and no mark)", lv)
	}
}

func TestLeaseWindows(t *testing.T) {
	rd := testutil.StartRedis(t)
	c := leaseClient(t, rd.Addr, "")
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
	c := leaseClient(t, rd.Addr, "")
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
	c := leaseClient(t, rd.Addr, "")
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
	if st := c.Stats(); st.Scripts != 6 {
		t.Fatalf("lease commands counted %d, want 6", st.Scripts)
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
	c := leaseClient(t, rd.Addr, "")
	rd.Kill()
	r := []LeaseRequest{{Key: "tollgate:rl:y:{k}", Limit: 5, Per: time.Second, Burst: 5, Want: 1}}
	out := make([]LeaseResult, 1)
	waitUntil(t, 3*time.Second, "a failed lease degrades the client", func() bool {
		err := c.Lease(200*time.Millisecond, r, out)
		return errors.Is(err, cluster.ErrDegraded)
	})
	start := time.Now()
	if err := c.Lease(time.Second, r, out); !errors.Is(err, cluster.ErrDegraded) || time.Since(start) > 50*time.Millisecond {
		t.Fatalf("lease while degraded: %v after %v", err, time.Since(start))
	}
}
