package limiter

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/cluster"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/pipeline"
)

// realNode is a node with its own Redis client and real time.
type realNode struct {
	f *Filter
	c *pipeline.Ctx
}

func newRealNodes(t *testing.T, addr string, n int, limits string) []*realNode {
	t.Helper()
	var out []*realNode
	for i := range n {
		cl, err := cluster.New(cluster.Options{Addrs: []string{addr}, NodeID: "n" + string(rune('0'+i)), ProbeEvery: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		e := newEnv()
		cluster.EnvKey.Set(e.shared, cl)
		cluster.NodesEnvKey.Set(e.shared, cluster.FixedNodes(n))
		st := e.state.Begin()
		var cfgs []Config
		mustYAML(t, limits, &cfgs)
		f, err := Build(&pipeline.Build{Env: e.env(time.Now, st),
			Route: pipeline.RouteInfo{Name: "api"}}, cfgs)
		if err != nil {
			t.Fatal(err)
		}
		st.Commit()
		t.Cleanup(func() { e.state.Begin().Commit() }) // releases the state: stops the worker
		out = append(out, &realNode{f: f, c: req{}.ctx(t)})
	}
	return out
}

// drive sends one request to each node every millisecond for d and
// returns the admissions and the slowest decision.
func drive(nodes []*realNode, d time.Duration) (ok int, slowest time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		for _, n := range nodes {
			start := time.Now()
			if n.f.Handle(n.c) == pipeline.Continue {
				ok++
			}
			slowest = max(slowest, time.Since(start))
		}
		time.Sleep(time.Millisecond)
	}
	return ok, slowest
}

// TestRedisFrozenOrKilledNeverStallsDecisions runs two nodes on a real
// redis-server and freezes it, then kills it, while they decide: no
// decision waits on Redis, the nodes fall back to their local share, and
// they return to leases by themselves when Redis answers again.
func TestRedisFrozenOrKilledNeverStallsDecisions(t *testing.T) {
	if testing.Short() {
		t.Skip("freezes and kills redis-server")
	}
	rd := testutil.StartRedis(t)
	nodes := newRealNodes(t, rd.Addr, 2, "[{by: route, rate: 200, per: 1s, burst: 200, scope: cluster}]")
	r0 := nodes[0].f.rules[0]
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10s", what)
			}
			drive(nodes, 20*time.Millisecond)
		}
	}
	ok, slowest := drive(nodes, 500*time.Millisecond)
	if r0.mode() != "cluster" || ok == 0 {
		t.Fatalf("healthy: mode %s, %d admitted", r0.mode(), ok)
	}
	t.Logf("healthy: %d admitted, slowest decision %v", ok, slowest)

	rd.Freeze()
	ok, slowest = drive(nodes, 1500*time.Millisecond)
	if slowest > 100*time.Millisecond {
		t.Fatalf("a decision waited %v on a frozen Redis", slowest)
	}
	if r0.mode() != "local fallback" || r0.counts.fallback.Load() == 0 {
		t.Fatalf("frozen: mode %s, fallback decisions %d", r0.mode(), r0.counts.fallback.Load())
	}
	t.Logf("frozen: %d admitted in 1.5 s, slowest decision %v", ok, slowest)
	rd.Thaw()
	waitFor("back on leases after thaw", func() bool { return r0.mode() == "cluster" })

	rd.Kill()
	ok, slowest = drive(nodes, time.Second)
	if slowest > 100*time.Millisecond || r0.mode() != "local fallback" {
		t.Fatalf("killed: slowest %v, mode %s", slowest, r0.mode())
	}
	t.Logf("killed: %d admitted in 1 s, slowest decision %v", ok, slowest)
	rd.Restart()
	waitFor("back on leases after restart", func() bool { return r0.mode() == "cluster" })
	// The nodes charged what they admitted alone to the fresh counter
	// (resync), so the first grants may wait for it to refill.
	before := r0.mgr.granted.Load()
	waitFor("tokens leased after the restart", func() bool { return r0.mgr.granted.Load() > before })
	if m := r0.mgr; m.fallbacks.Load() < 2 || m.recoveries.Load() < 2 {
		t.Fatalf("fallbacks %d recoveries %d", m.fallbacks.Load(), m.recoveries.Load())
	}
}

// TestRejectForIsSharedAcrossNodes: a key that trips a cluster rule with
// reject_for on one node is refused on the others too, through the
// blocked set they watch with client-side caching.
func TestRejectForIsSharedAcrossNodes(t *testing.T) {
	rd := testutil.StartRedis(t)
	nodes := newRealNodes(t, rd.Addr, 2, "[{by: route, rate: 5, per: 1s, burst: 5, scope: cluster, reject_for: 3s}]")
	a, b := nodes[0], nodes[1]
	for range 20 {
		a.f.Handle(a.c)
		time.Sleep(time.Millisecond)
	}
	ra, rb := a.f.rules[0], b.f.rules[0]
	if ra.counts.refused.Load() == 0 {
		t.Fatal("node a never tripped")
	}
	deadline := time.Now().Add(5 * time.Second)
	for ra.mgr.shared.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the trip was not announced")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Past the bucket's refill, node b still refuses: the key is blocked.
	time.Sleep(1200 * time.Millisecond)
	if b.f.Handle(b.c) != pipeline.Stop || rb.counts.blocked.Load() == 0 {
		t.Fatalf("node b: refused %d, blocked %d", rb.counts.refused.Load(), rb.counts.blocked.Load())
	}
	if got := b.c.Resp.Header.Peek("Retry-After"); len(got) == 0 || got[0] < '1' || got[0] > '3' {
		t.Fatalf("Retry-After %q", got)
	}
}

// releaseLog is a Waiter that records when each held request would be
// released instead of holding it, so one loop can drive several nodes.
type releaseLog struct {
	at    []time.Time
	worst time.Duration
}

func (l *releaseLog) Sleep(_ *pipeline.Ctx, d time.Duration) {
	l.at[len(l.at)-1] = l.at[len(l.at)-1].Add(d)
	l.worst = max(l.worst, d)
}
func (l *releaseLog) Block(_ *pipeline.Ctx, call pipeline.BlockingCall) { call.Run() }

// TestClusterLeakyBucketOnRedis: two nodes on a real redis-server, each
// offered twice the cluster's leaky rate, release the rate between them
// from the one schedule in Redis, none held beyond max_delay.
func TestClusterLeakyBucketOnRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("takes seconds")
	}
	rd := testutil.StartRedis(t)
	nodes := newRealNodes(t, rd.Addr, 2, "[{by: route, rate: 200, per: 1s, scope: cluster, algorithm: leaky_bucket, max_delay: 200ms}]")
	log := &releaseLog{}
	for _, n := range nodes {
		n.c.SetWaiter(log)
	}
	const d = 3 * time.Second
	start := time.Now()
	for time.Since(start) < d {
		for _, n := range nodes {
			log.at = append(log.at, time.Now())
			if n.f.Handle(n.c) != pipeline.Continue {
				log.at = log.at[:len(log.at)-1]
			}
		}
		time.Sleep(2500 * time.Microsecond) // 400/s offered to each node
	}
	// Count what was released in the last two seconds (the first is the
	// first leases' and debts' start).
	from, to := start.Add(time.Second), start.Add(d)
	n := 0
	for _, at := range log.at {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	t.Logf("%d released in 2 s for a cluster rate of 200/s (800/s offered), longest hold %v", n, log.worst)
	if n < 360 || n > 440 {
		t.Fatalf("%d released in 2 s; want 400 ± 10%%", n)
	}
	if log.worst > 200*time.Millisecond {
		t.Fatalf("held %v, beyond max_delay", log.worst)
	}
	if r := nodes[0].f.rules[0]; r.mode() != "cluster" || r.mgr.granted.Load() == 0 {
		t.Fatalf("mode %s, granted %d", r.mode(), r.mgr.granted.Load())
	}
}
