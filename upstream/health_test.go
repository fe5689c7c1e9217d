package upstream

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/breaker"
	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

func serviceWith(t *testing.T, cfg ServiceConfig, h Health, addrs ...string) *Service {
	t.Helper()
	st := pipeline.NewState(time.Second).Begin()
	var ins []*Instance
	for _, a := range addrs {
		ins = append(ins, SharedInstance(st, a, 1, Pool{Read: time.Second}, h, nil))
	}
	svc, err := NewService(cfg, ins)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, in := range ins {
			in.close()
		}
	})
	return svc
}

// TestEjectionAndRecovery: an instance answering 5xx is ejected after
// eject_after failures in a row, the other one takes everything with no
// client error, and the ejected one is back within a probe interval of
// recovering.
func TestEjectionAndRecovery(t *testing.T) {
	good := testutil.StartUpstream(t, "good")
	bad := testutil.StartUpstream(t, "bad")
	bad.Status.Store(500)
	svc := serviceWith(t, ServiceConfig{Name: "s"}, Health{Path: "/health", Interval: 200 * time.Millisecond,
		EjectAfter: 3, HealthyAfter: 1}, good.Addr, bad.Addr)
	var badIn *Instance
	for _, in := range svc.Instances() {
		if in.Addr == bad.Addr {
			badIn = in
		}
	}
	failures := 0
	for range 20 {
		_, resp := serve(t, svc, "GET", "/x")
		if resp.StatusCode() != 200 {
			failures++
		}
	}
	if badIn.Status().State != "ejected" {
		t.Fatalf("the failing instance is %s after %d failures", badIn.Status().State, failures)
	}
	if failures != 3 {
		t.Fatalf("%d client errors, want exactly eject_after = 3", failures)
	}
	seen := bad.Requests.Load()
	for range 20 {
		if _, resp := serve(t, svc, "GET", "/x"); resp.StatusCode() != 200 {
			t.Fatal("a client error after the ejection")
		}
	}
	if bad.Requests.Load() > seen+2 { // probes only (none is due yet, or one)
		t.Fatalf("the ejected instance still got traffic: %d requests", bad.Requests.Load()-seen)
	}
	bad.Status.Store(0) // recovered
	deadline := time.Now().Add(time.Second)
	for badIn.Status().State != "up" {
		if time.Now().After(deadline) {
			t.Fatalf("not back 1s after recovering (probe interval 200ms): %+v", badIn.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if badIn.Status().Recovered != 1 {
		t.Fatalf("recoveries %d", badIn.Status().Recovered)
	}
}

// TestLastHealthyInstanceIsKept: the only instance left is never ejected,
// however it fails; it is counted instead.
func TestLastHealthyInstanceIsKept(t *testing.T) {
	bad := testutil.StartUpstream(t, "bad")
	bad.Status.Store(503)
	svc := serviceWith(t, ServiceConfig{Name: "s"}, Health{EjectAfter: 2}, bad.Addr)
	for range 10 {
		serve(t, svc, "GET", "/x")
	}
	st := svc.Instances()[0].Status()
	if st.State != "up" || st.Kept == 0 {
		t.Fatalf("the last instance: %+v", st)
	}
}

// TestServiceBreaker: the service's breaker opens on failures and then
// answers at once without upstream traffic; a retried request counts once.
func TestServiceBreaker(t *testing.T) {
	bad := testutil.StartUpstream(t, "bad")
	bad.Status.Store(502)
	br := breaker.New(breaker.Config{MinRequests: 5, OpenFor: time.Hour}, nil)
	svc := serviceWith(t, ServiceConfig{Name: "s", Breaker: br}, Health{EjectAfter: 1000}, bad.Addr)
	for range 5 {
		serve(t, svc, "GET", "/x")
	}
	if br.State() != breaker.Open {
		t.Fatalf("breaker %v after 5 failures", br.State())
	}
	n := bad.Requests.Load()
	start := time.Now()
	c, resp := serve(t, svc, "GET", "/x")
	if resp.StatusCode() != 503 || c.Outcome.Result != pipeline.ResultOpen || bad.Requests.Load() != n {
		t.Fatalf("open breaker: status %d outcome %v upstream requests +%d", resp.StatusCode(), c.Outcome.Result, bad.Requests.Load()-n)
	}
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Fatalf("the open breaker took %v to answer", d)
	}
}

// TestRouteDeadlineCapsTheService: a route's own budget ends the exchange
// before the service's total.
func TestRouteDeadlineCapsTheService(t *testing.T) {
	slow := testutil.StartUpstream(t, "slow")
	slow.Delay.Store(int64(500 * time.Millisecond))
	svc := serviceWith(t, ServiceConfig{Name: "s", Total: 5 * time.Second}, Health{}, slow.Addr)
	c, resp := serve(t, svc, "GET", "/x") // no route budget: waits for the answer
	if resp.StatusCode() != 200 {
		t.Fatalf("status %d", resp.StatusCode())
	}
	_ = c
	start := time.Now()
	req, r2 := &fasthttp.Request{}, &fasthttp.Response{}
	req.SetRequestURI("/x")
	req.Header.SetHost("h")
	c2 := &pipeline.Ctx{Req: req, Resp: r2, Start: start}
	_ = codec.ParseTarget(&c2.Target, &req.Header)
	c2.Trace.FillHex()
	routeDeadline{total: 200 * time.Millisecond}.Handle(c2)
	proxy(c2, svc)
	if r2.StatusCode() != 504 || time.Since(start) > 600*time.Millisecond {
		t.Fatalf("with a 200ms route budget: status %d after %v", r2.StatusCode(), time.Since(start))
	}
}
