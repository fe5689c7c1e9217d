package admin

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/observe"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

func serveAdmin(t *testing.T, d Deps) string {
	t.Helper()
	s := New(d)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { ln.Close() })
	return "http://" + ln.Addr().String()
}

func opsDeps(token string, m *observe.Metrics, ready func() (bool, string)) Deps {
	snap := &config.Snapshot{Version: 3, Source: "t.yaml", Loaded: time.Now(), File: &config.File{NodeID: "n1"}}
	return Deps{
		Token:    token,
		Snapshot: func() *config.Snapshot { return snap },
		Reload:   func() (*config.Snapshot, error) { return snap, nil },
		Stats:    func() any { return map[string]any{"conns": 2} },
		Ops:      Ops{Metrics: m, Ready: ready},
	}
}

func TestEveryEndpointNeedsTheToken(t *testing.T) {
	m := observe.NewMetrics()
	base := serveAdmin(t, opsDeps("t0ken", m, nil))
	guarded := []struct{ method, path string }{
		{"GET", "/admin/config"}, {"GET", "/admin/stats"}, {"GET", "/admin/breakers"}, {"GET", "/admin/instances"},
		{"GET", "/admin/limits"}, {"GET", "/admin/live"}, {"GET", "/dashboard"}, {"GET", "/debug/goroutines"},
		{"GET", "/debug/pprof/"}, {"GET", "/admin/nonexistent"}, {"GET", "/admin/history"},
		{"POST", "/admin/reload"}, {"POST", "/admin/revoke"}, {"POST", "/admin/breakers"}, {"POST", "/admin/degrade"},
		{"POST", "/admin/instances"},
	}
	for _, e := range guarded {
		if st, body := do(t, e.method, base+e.path, ""); st != 401 || !strings.Contains(body, "missing or wrong token") {
			t.Errorf("%s %s without the token: %d %s", e.method, e.path, st, body)
		}
		if st, _ := do(t, e.method, base+e.path, "wrong"); st != 401 {
			t.Errorf("%s %s with a wrong token: %d", e.method, e.path, st)
		}
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if st, _ := do(t, "GET", base+p, ""); st != 200 {
			t.Errorf("GET %s without the token: %d, want 200", p, st)
		}
	}
	for _, p := range []string{"/admin/config", "/admin/stats", "/dashboard", "/admin/live"} {
		if st, _ := do(t, "GET", base+p, "t0ken"); st != 200 {
			t.Errorf("GET %s with the token: %d", p, st)
		}
	}
	// A browser gives the token as a Basic password: fine for reading,
	// never for a change (a page on another site could make the browser
	// send it with a form).
	basic := func(method, path, pass string) int {
		req, _ := http.NewRequest(method, base+path, nil)
		req.SetBasicAuth("ops", pass)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == 401 && resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("401 without WWW-Authenticate")
		}
		return resp.StatusCode
	}
	if st := basic("GET", "/dashboard", "t0ken"); st != 200 {
		t.Errorf("dashboard with Basic: %d", st)
	}
	if st := basic("GET", "/dashboard", "nope"); st != 401 {
		t.Errorf("dashboard with a wrong Basic password: %d", st)
	}
	if st := basic("POST", "/admin/reload", "t0ken"); st != 401 {
		t.Errorf("reload with Basic: %d, want 401", st)
	}
	// Failures are counted (and logged, at most once a second).
	_, metrics := do(t, "GET", base+"/metrics", "")
	for _, want := range []string{`tollgate_admin_auth_failures_total{token="missing"} 16`, `tollgate_admin_auth_failures_total{token="wrong"} 18`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestReadsOpenWithoutTokenChangesRefused(t *testing.T) {
	base := serveAdmin(t, opsDeps("", nil, nil))
	for _, p := range []string{"/admin/config", "/admin/stats", "/dashboard", "/admin/live"} {
		if st, _ := do(t, "GET", base+p, ""); st != 200 {
			t.Errorf("GET %s on loopback without a token: %d", p, st)
		}
	}
	if st, _ := do(t, "POST", base+"/admin/reload", ""); st != 403 {
		t.Errorf("reload without a configured token: %d, want 403", st)
	}
	if st, _ := do(t, "GET", base+"/metrics", ""); st != 404 {
		t.Errorf("/metrics with metrics off: %d, want 404", st)
	}
}

func TestCheckListen(t *testing.T) {
	for _, c := range []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:0", "", true}, {"[::1]:0", "", true}, {"0.0.0.0:0", "", false}, {"[::]:0", "", false},
		{"0.0.0.0:0", "tok", true},
	} {
		ln, err := net.Listen("tcp", c.addr)
		if err != nil {
			t.Logf("%s: %v (skipped)", c.addr, err)
			continue
		}
		err = CheckListen(ln.Addr(), c.token)
		ln.Close()
		if (err == nil) != c.ok {
			t.Errorf("CheckListen(%s, token %q) = %v, want ok %v", c.addr, c.token, err, c.ok)
		}
	}
}

func TestConfigMasksSecrets(t *testing.T) {
	yml := `
admin: {token: "adm-SECRET-1"}
cluster: {redis: "redis://u:redis-SECRET-2@127.0.0.1:6379", password: "redis-SECRET-3"}
consumers:
  - {app_key: app-1, secret: "consumer-SECRET-4"}
jwt:
  keys:
    - {kid: k1, alg: HS256, secret: "jwt-SECRET-5"}
services:
  s: {instances: [{addr: "127.0.0.1:9"}]}
  token-svc: {instances: [{addr: "127.0.0.1:8"}]}
routes:
  - {name: r, match: {prefix: /}, service: s}
  - name: m
    match: {prefix: /m/}
    mock: {responses: [{headers: {X-Api-Key: "hdr-SECRET-6", Content-Type: text/plain, X-Amz-Security-Token: "hdr-SECRET-7"}}]}
`
	f, err := config.Parse("t.yaml", []byte(yml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	f.Defaults()
	snap := &config.Snapshot{Version: 1, File: f}
	base := serveAdmin(t, Deps{Token: "adm-SECRET-1", Snapshot: func() *config.Snapshot { return snap }, Stats: func() any { return nil }})
	st, body := do(t, "GET", base+"/admin/config", "adm-SECRET-1")
	if st != 200 {
		t.Fatalf("config: %d %s", st, body)
	}
	if strings.Contains(body, "SECRET") {
		t.Fatalf("a secret is shown:\n%s", body)
	}
	var v struct {
		Effective map[string]any `json:"effective"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"app_key":"app-1"`, `"secret":"***"`, `"password":"***"`, `redis://u:%2A%2A%2A@127.0.0.1:6379`, `"kid":"k1"`,
		`"X-Api-Key":"***"`, `"Content-Type":"text/plain"`, `"token-svc":{`, `"addr":"127.0.0.1:8"`} {
		if !strings.Contains(body, want) {
			t.Errorf("config lacks %s:\n%s", want, body)
		}
	}
}

func TestReadyz(t *testing.T) {
	var ready atomic.Bool
	base := serveAdmin(t, opsDeps("tok", nil, func() (bool, string) {
		if ready.Load() {
			return true, ""
		}
		return false, "draining"
	}))
	if st, body := do(t, "GET", base+"/readyz", ""); st != 503 || !strings.Contains(body, "draining") {
		t.Fatalf("not ready: %d %s", st, body)
	}
	ready.Store(true)
	if st, _ := do(t, "GET", base+"/readyz", ""); st != 200 {
		t.Fatalf("ready: %d", st)
	}
}

func TestLiveFigures(t *testing.T) {
	m := observe.NewMetrics()
	m.SetRoutes([]string{"orders", "idle"}, nil)
	base := serveAdmin(t, opsDeps("", m, nil))
	var req fasthttp.Request
	var resp fasthttp.Response
	send := func(n int) {
		for range n {
			resp.SetStatusCode(200)
			c := pipeline.Acquire(&req, &resp)
			c.RouteName = "orders"
			c.Start = time.Now()
			m.Observe(c, c.Start.Add(700*time.Microsecond))
			pipeline.Release(c)
		}
	}
	read := func() map[string]any {
		st, body := do(t, "GET", base+"/admin/live", "")
		if st != 200 {
			t.Fatalf("live: %d %s", st, body)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	send(10)
	read()
	send(500)
	time.Sleep(600 * time.Millisecond)
	v := read()
	qps := v["totals"].(map[string]any)["qps"].(float64)
	if qps < 100 {
		t.Fatalf("qps %v after 500 requests in 0.6s", qps)
	}
	var orders map[string]any
	for _, r := range v["routes"].([]any) {
		if r.(map[string]any)["name"] == "orders" {
			orders = r.(map[string]any)
		}
	}
	if orders == nil || orders["total"].(float64) != 510 || orders["p50"].(float64) < 0.5 || orders["p50"].(float64) > 1 {
		t.Fatalf("orders row: %v", orders)
	}
	// A second poll within half a second is the same answer (no new work).
	_, a := do(t, "GET", base+"/admin/live", "")
	send(5)
	_, b := do(t, "GET", base+"/admin/live", "")
	if a != b {
		t.Fatal("polls within 500ms computed twice")
	}
}
