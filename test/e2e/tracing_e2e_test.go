//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/sign"
	"github.com/valyala/fasthttp"
)

func tracingConfig(dead, backend, collector string) string {
	return fmt.Sprintf(`
watch: false
consumers:
  - {app_key: demo-app, secret: %q, tier: basic}
services:
  orders: {instances: [{addr: %q}, {addr: %q}], retry: 1}
routes:
  - name: orders
    match: {prefix: /api/}
    auth: signature
    limits:
      - {by: consumer, rate: 12, per: 1m, burst: 12}
    service: orders
tracing:
  otlp:
    endpoint: %q
    protocol: grpc
    timeout: 300ms
    queue: 16
    batch: 4
    batch_delay: 50ms
    retry: {initial: 100ms, max: 200ms, max_elapsed: 400ms}
  sample: 1
  refusals: true
  service_name: edge
  propagation: {read: [w3c, b3], write: [w3c, b3multi]}
`, demoSecret, dead, backend, collector)
}

// tracedSend sends req and returns the answer's status and the trace id
// its traceparent names.
func tracedSend(t *testing.T, addr string, req *fasthttp.Request) (int, string, time.Duration) {
	t.Helper()
	r := &fasthttp.Request{}
	req.CopyTo(r)
	r.SetHost(addr)
	var resp fasthttp.Response
	start := time.Now()
	if err := fasthttp.DoTimeout(r, &resp, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	tp := strings.Split(string(resp.Header.Peek("traceparent")), "-")
	if len(tp) != 4 {
		t.Fatalf("answer without a traceparent: %d %s", resp.StatusCode(), resp.Body())
	}
	return resp.StatusCode(), tp[1], took
}

func spansNamed(tr *testutil.JaegerTrace, name string) []*testutil.JaegerSpan {
	var out []*testutil.JaegerSpan
	for i := range tr.Spans {
		if tr.Spans[i].OperationName == name {
			out = append(out, &tr.Spans[i])
		}
	}
	return out
}

// TestTracesReachJaeger runs the binary against a real Jaeger: a signed
// request through a route with a limit and a retrying upstream is one
// trace with the gateway's span, a span per try and the backend's own
// span; a caller's B3 trace is joined; a refusal shows; and a collector
// that hangs or dies changes nothing for requests, its drops are counted,
// and export resumes when it is back.
func TestTracesReachJaeger(t *testing.T) {
	j := testutil.StartJaeger(t)
	backend := startTracedBackend(t, j.OTLPHTTP)
	dead := testutil.FreeAddr(t)
	logPath := filepath.Join(t.TempDir(), "access.log")
	a, admin := freePort(t), freePort(t)
	startProc(t, a, admin, []string{"TOLLGATE_ACCESS_LOG=" + logPath}, "run", "-c",
		writeConfig(t, tracingConfig(dead, backend.Addr, j.OTLPGRPC)))
	req := func() *fasthttp.Request {
		return signed(t, a, "GET", "/api/orders/42", "", "demo-app", time.Now(), sign.NewNonce())
	}

	// Round robin puts the dead instance first for one of two requests.
	var retried *testutil.JaegerTrace
	var retriedID string
	for range 2 {
		st, id, _ := tracedSend(t, a, req())
		if st != 200 {
			t.Fatalf("signed request: %d", st)
		}
		if got := backend.last().Get("X-B3-TraceId"); got != id || !strings.Contains(backend.last().Get("traceparent"), id) {
			t.Fatalf("the backend got trace %q / %q, the client %s", got, backend.last().Get("traceparent"), id)
		}
		tr := j.WaitTrace(t, id, 3, 15*time.Second)
		if tr == nil || len(tr.Spans) < 3 {
			t.Fatalf("trace %s in Jaeger: %+v", id, tr)
		}
		if len(spansNamed(tr, "upstream")) == 2 {
			retried, retriedID = tr, id
		}
	}
	if retried == nil {
		t.Fatal("no request was retried")
	}
	for _, s := range retried.Spans {
		t.Logf("trace %s: %s span %q (parent %s)", retriedID, retried.Service(&s), s.OperationName, s.Parent())
	}
	checkRetriedTrace(t, retried, dead, backend.Addr)
	waitLogHas(t, logPath, `"traceId":"`+retriedID+`"`)

	// A caller's B3 context: the gateway joins its trace.
	b3req := req()
	b3req.Header.Set("X-B3-TraceId", "463ac35c9f6413ad48485a3953bb6124")
	b3req.Header.Set("X-B3-SpanId", "a2fb4a1d1a96d312")
	b3req.Header.Set("X-B3-Sampled", "1")
	if st, id, _ := tracedSend(t, a, b3req); st != 200 || id != "463ac35c9f6413ad48485a3953bb6124" {
		t.Fatalf("B3 request: %d, trace %s", st, id)
	}
	tr := j.WaitTrace(t, "463ac35c9f6413ad48485a3953bb6124", 2, 15*time.Second)
	if gw := spansNamed(tr, "GET /api/"); len(gw) != 1 || gw[0].Parent() != "a2fb4a1d1a96d312" {
		t.Fatalf("the gateway's span did not join the caller's B3 trace: %+v", tr)
	}

	// Past the limit: the refusal is in its trace.
	var refusedID string
	for range 20 {
		st, id, _ := tracedSend(t, a, req())
		if st == 911 {
			refusedID = id
			break
		}
	}
	if refusedID == "" {
		t.Fatal("the limit never refused")
	}
	tr = j.WaitTrace(t, refusedID, 1, 15*time.Second)
	gw := spansNamed(tr, "GET /api/")
	if len(gw) != 1 || gw[0].Tag("http.response.status_code") != "911" || gw[0].Tag("tollgate.decision") == "" ||
		len(gw[0].Logs) != 1 || !slices.ContainsFunc(gw[0].Logs[0].Fields, func(f testutil.JaegerTag) bool { return f.Value == "gateway answer" }) {
		t.Fatalf("the refusal's trace: %+v", tr)
	}

	checkCollectorOutages(t, j, a, admin)
}

func checkRetriedTrace(t *testing.T, tr *testutil.JaegerTrace, dead, backend string) {
	t.Helper()
	gw := spansNamed(tr, "GET /api/")
	if len(gw) != 1 || tr.Service(gw[0]) != "edge" {
		t.Fatalf("gateway span: %+v", tr)
	}
	g := gw[0]
	for k, want := range map[string]string{"tollgate.route": "orders", "tollgate.consumer": "demo-app",
		"http.response.status_code": "200", "client.address": "127.0.0.1", "tollgate.service": "orders",
		"tollgate.upstream.attempts": "2", "http.route": "/api/", "http.request.method": "GET"} {
		if got := g.Tag(k); got != want {
			t.Errorf("gateway span %s = %q, want %q", k, got, want)
		}
	}
	if g.Tag("tollgate.node") == "" {
		t.Error("gateway span without its node")
	}
	tries := spansNamed(tr, "upstream")
	slices.SortFunc(tries, func(x, y *testutil.JaegerSpan) int { return int(x.StartTime - y.StartTime) })
	if tries[0].Tag("server.address") != dead || tries[0].Tag("tollgate.upstream.result") != "refused" ||
		tries[1].Tag("server.address") != backend || tries[1].Tag("http.response.status_code") != "200" {
		t.Errorf("tries: %+v %+v", tries[0].Tags, tries[1].Tags)
	}
	var backendSpan *testutil.JaegerSpan
	for i := range tr.Spans {
		s := &tr.Spans[i]
		if tr.Service(s) == "orders-backend" {
			backendSpan = s
		} else if s != g && s.Parent() != g.SpanID {
			t.Errorf("span %s is not the gateway span's child", s.OperationName)
		}
	}
	// The backend's span sits under the try that reached it.
	if backendSpan == nil || backendSpan.Parent() != tries[1].SpanID || backendSpan.Tag("x-b3-traceid") != tr.TraceID {
		t.Errorf("backend span %+v, answering try %s", backendSpan, tries[1].SpanID)
	}
}

// waitLogHas waits for the access log to hold want.
func waitLogHas(t *testing.T, path, want string) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if b, _ := os.ReadFile(path); strings.Contains(string(b), want) {
			return
		}
	}
	t.Fatalf("the access log has no %s", want)
}

// checkCollectorOutages freezes, then kills the collector under requests:
// they are answered as fast as before, spans past the queue are dropped
// and counted, and a request after the collector's return is exported.
func checkCollectorOutages(t *testing.T, j *testutil.Jaeger, a, admin string) {
	unsigned := func() *fasthttp.Request {
		// The limit is spent: an unsigned request is refused at once,
		// which is what the latency compares.
		r := &fasthttp.Request{}
		r.SetRequestURI("http://" + a + "/api/orders/1")
		return r
	}
	latencies := func() time.Duration {
		var ds []time.Duration
		for range 200 {
			_, _, d := tracedSend(t, a, unsigned())
			ds = append(ds, d)
		}
		slices.Sort(ds)
		return ds[len(ds)*99/100]
	}
	before := latencies()
	for _, outage := range []struct {
		name       string
		stop, back func()
	}{{"frozen", j.Freeze, j.Thaw}, {"killed", j.Kill, j.Restart}} {
		dropped := sumOf(scrape(t, admin), "tollgate_tracing_spans_dropped_total", nil)
		outage.stop()
		during := latencies()
		if during > before*3+20*time.Millisecond {
			t.Errorf("collector %s: p99 %s, before %s", outage.name, during, before)
		}
		if after := sumOf(scrape(t, admin), "tollgate_tracing_spans_dropped_total", nil); after <= dropped {
			t.Errorf("collector %s: no span counted as dropped (%v then %v)", outage.name, dropped, after)
		}
		outage.back()
		// Batches queued during the outage may still be retried; a new
		// request's trace gets through once they are done.
		var found bool
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end) && !found; {
			_, id, _ := tracedSend(t, a, unsigned())
			found = j.WaitTrace(t, id, 1, 2*time.Second) != nil
		}
		if !found {
			t.Fatalf("collector %s and back: no trace exported since", outage.name)
		}
	}
}
