package adaptive

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

func newCtx() *pipeline.Ctx {
	return pipeline.AcquireParsed(new(fasthttp.Request), new(fasthttp.Response))
}

func fixedGate(t testing.TB, s Settings) *Gate {
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	return NewGate(&s, time.Now())
}

// TestGateRefusesPastTheLimit: with the slots taken, a request waits
// max_wait (off a loop, by polling) and is refused with the configured
// status, Retry-After and the gateway's JSON error shape; a released
// slot is taken again.
func TestGateRefusesPastTheLimit(t *testing.T) {
	g := fixedGate(t, Settings{Limit: "2", MaxWait: pipeline.Duration(2 * time.Millisecond), Status: 429, RetryAfter: 7})
	a, b, c := newCtx(), newCtx(), newCtx()
	ta, ok1 := g.Acquire(a)
	_, ok2 := g.Acquire(b)
	if !ok1 || !ok2 {
		t.Fatal("the first two requests were refused under a limit of 2")
	}
	start := time.Now()
	if _, ok := g.Acquire(c); ok {
		t.Fatal("a third request was admitted under a limit of 2")
	}
	if waited := time.Since(start); waited < 2*time.Millisecond {
		t.Fatalf("refused after %s, before max_wait", waited)
	}
	r := c.Resp
	if r.StatusCode() != 429 || string(r.Header.Peek("Retry-After")) != "7" || c.Decision != Decision ||
		!strings.HasPrefix(string(r.Body()), `{"code":429,"message":"concurrency limit reached","trace_id":"`) {
		t.Fatalf("refusal %d Retry-After %q decision %q body %s", r.StatusCode(), r.Header.Peek("Retry-After"), c.Decision, r.Body())
	}
	g.Release(a, ta, time.Millisecond, true, false)
	if _, ok := g.Acquire(newCtx()); !ok {
		t.Fatal("a released slot was not taken again")
	}
	st := g.Status()
	if st.InFlight != 2 || st.Admitted != 3 || st.Refused != 1 || st.Limit != 2 {
		t.Fatalf("status %+v", st)
	}
}

// TestGateAdmitsWaiterWhenSlotFrees: a request polling off a loop gets a
// slot released within its max_wait.
func TestGateAdmitsWaiterWhenSlotFrees(t *testing.T) {
	g := fixedGate(t, Settings{Limit: "1", MaxWait: pipeline.Duration(500 * time.Millisecond)})
	a := newCtx()
	ta, _ := g.Acquire(a)
	go func() {
		time.Sleep(5 * time.Millisecond)
		g.Release(a, ta, time.Millisecond, true, false)
	}()
	if _, ok := g.Acquire(newCtx()); !ok {
		t.Fatal("a slot freed within max_wait was not handed on")
	}
	if st := g.Status(); st.Waited != 1 {
		t.Fatalf("waited %d, want 1", st.Waited)
	}
}

func TestSettingsCheck(t *testing.T) {
	for _, bad := range []Settings{{Limit: "lots"}, {Limit: "0"}, {Min: 10, Max: 5}, {Status: 200},
		{MaxWait: pipeline.Duration(2 * time.Second)}, {RetryAfter: -1}} {
		if err := bad.Check(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	s := Settings{}
	if err := s.Check(); err != nil || s.Limit != "adaptive" || s.Min != defaultMin || s.Max != defaultMax ||
		s.MaxWait.D() != defaultMaxWait || s.Status != 503 || s.RetryAfter != 1 {
		t.Fatalf("defaults %+v (%v)", s, err)
	}
}

// TestGatePathAllocatesNothing: admission and release, the estimator's
// window update included, allocate nothing.
func TestGatePathAllocatesNothing(t *testing.T) {
	if testutil.Race {
		t.Skip("the race detector allocates")
	}
	g := fixedGate(t, Settings{})
	c := newCtx()
	c.Outcome.Result, c.Outcome.Latency = pipeline.ResultOK, time.Millisecond
	if n := testing.AllocsPerRun(1000, func() {
		tk, ok := g.Acquire(c)
		if !ok {
			t.Fatal("refused")
		}
		g.ReleaseOutcome(c, tk)
	}); n != 0 {
		t.Fatalf("%.1f allocations per request", n)
	}
}

func BenchmarkGateAcquireRelease(b *testing.B) {
	g := fixedGate(b, Settings{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		c := newCtx()
		c.Outcome.Result, c.Outcome.Latency = pipeline.ResultOK, time.Millisecond
		for pb.Next() {
			if tk, ok := g.Acquire(c); ok {
				g.ReleaseOutcome(c, tk)
			}
		}
	})
}

// TestGatesListedForAdmin: every gate of a snapshot shows under "limits"
// (GET /admin/limits) and "concurrency" (the dashboard), named.
func TestGatesListedForAdmin(t *testing.T) {
	gs := &Gates{}
	for _, e := range []struct{ scope, name string }{{ScopeService, "up"}, {ScopeRoute, "items"}} {
		gs.list = append(gs.list, entry{scope: e.scope, name: e.name, gate: fixedGate(t, Settings{Limit: "3"})})
	}
	kinds := map[string][]string{}
	gs.Inspect(func(kind string, state any) {
		st := state.(Status)
		kinds[kind] = append(kinds[kind], st.Scope+"/"+st.Name)
	})
	for _, k := range []string{"limits", "concurrency"} {
		if got := strings.Join(kinds[k], ","); got != "service/up,route/items" {
			t.Errorf("%s lists %q", k, got)
		}
	}
}
