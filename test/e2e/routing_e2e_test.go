//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/valyala/fasthttp"
)

// routingConfig is examples/routing.yaml with test upstreams and the
// loopback trusted, so X-Forwarded-For can play remote clients.
func routingConfig(t *testing.T, up map[string]*testutil.Upstream) string {
	t.Helper()
	b, err := os.ReadFile("../../examples/routing.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for port, name := range map[string]string{"9001": "v1a", "9002": "v1b", "9003": "v2", "9004": "pay", "9005": "legacy"} {
		s = strings.ReplaceAll(s, "127.0.0.1:"+port, up[name].Addr)
	}
	s = strings.Replace(s, `trusted_proxies: ["10.0.0.0/8"]`, `trusted_proxies: ["10.0.0.0/8", "127.0.0.1"]`, 1)
	return s
}

type result struct {
	status int
	body   string
	header *fasthttp.ResponseHeader
}

func call(t *testing.T, addr, method, uri string, headers map[string]string, body string) result {
	t.Helper()
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	resp := &fasthttp.Response{}
	req.SetRequestURI("http://" + addr + uri)
	req.Header.SetMethod(method)
	for k, v := range headers {
		if k == "Host" {
			req.Header.SetHost(v)
			req.UseHostHeader = true
			continue
		}
		req.Header.Set(k, v)
	}
	if body != "" {
		req.SetBodyString(body)
	}
	if err := fasthttp.DoTimeout(req, resp, 5*time.Second); err != nil {
		t.Fatalf("%s %s: %v", method, uri, err)
	}
	return result{resp.StatusCode(), string(resp.Body()), &resp.Header}
}

func startRoutingUpstreams(t *testing.T) map[string]*testutil.Upstream {
	up := map[string]*testutil.Upstream{}
	for _, name := range []string{"v1a", "v1b", "v2", "pay", "legacy"} {
		up[name] = testutil.StartUpstream(t, name)
	}
	return up
}

func TestRoutingEndToEnd(t *testing.T) {
	up := startRoutingUpstreams(t)
	cfg := writeConfig(t, routingConfig(t, up))
	if out, err := runValidate(cfg); err != nil {
		t.Fatalf("validate: %v %s", err, out)
	}
	addr := freePort(t)
	startProc(t, addr, "off", nil, "run", "-c", cfg)

	t.Run("condition and fixed rewrite", func(t *testing.T) {
		r := call(t, addr, "POST", "/gateway?cmd_id=1002", map[string]string{"X-Channel": "app"}, "")
		if r.status != 200 || r.body != "pay" || up["pay"].Last().URI != "/pay/do?cmd_id=1002" {
			t.Fatalf("got %d %s, upstream saw %s", r.status, r.body, up["pay"].Last().URI)
		}
		// The wrong channel falls to the next rule, which does not hold
		// either: the fallbacks take it.
		r = call(t, addr, "POST", "/gateway?cmd_id=1002", map[string]string{"X-Channel": "web"}, "")
		if r.body != "legacy" && r.body != "v1a" && r.body != "v1b" {
			t.Fatalf("unmatched condition went to %s", r.body)
		}
	})
	t.Run("json and form conditions leave the body intact", func(t *testing.T) {
		body := `{"merchant":{"tier":"gold","id":7},"amount":100}`
		r := call(t, addr, "POST", "/gateway", map[string]string{"Content-Type": "application/json"}, body)
		if r.body != "pay" || up["pay"].Last().URI != "/pay/priority" || string(up["pay"].Last().Body) != body {
			t.Fatalf("json: %s, upstream %s %q", r.body, up["pay"].Last().URI, up["pay"].Last().Body)
		}
		form := "amount=5&merchant_id=42"
		r = call(t, addr, "POST", "/gateway", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, form)
		if r.body != "pay" || string(up["pay"].Last().Body) != form {
			t.Fatalf("form: %s, upstream body %q", r.body, up["pay"].Last().Body)
		}
	})
	t.Run("canary with prefix rewrite and force header", func(t *testing.T) {
		r := call(t, addr, "GET", "/api/order/list", map[string]string{"X-User-Id": "u-1", "X-Service-Version": "order-v2"}, "")
		if r.body != "v2" || up["v2"].Last().URI != "/internal/order/list" {
			t.Fatalf("forced: %s, upstream %s", r.body, up["v2"].Last().URI)
		}
	})
	t.Run("regex route and regex rewrite", func(t *testing.T) {
		r := call(t, addr, "GET", "/orders/17", nil, "")
		if r.body != "v2" || up["v2"].Last().URI != "/v2/order/17" {
			t.Fatalf("got %s, upstream %s", r.body, up["v2"].Last().URI)
		}
	})
	t.Run("deprecated version headers", func(t *testing.T) {
		r := call(t, addr, "GET", "/v1/order/1", nil, "")
		if r.status != 200 || !strings.HasPrefix(r.body, "v1") {
			t.Fatalf("got %d %s", r.status, r.body)
		}
		want := map[string]string{
			"Deprecation":      "@1780272000",
			"Sunset":           "Tue, 01 Jun 2027 00:00:00 GMT",
			"X-API-Deprecated": "true",
			"Link":             `</v2/>; rel="successor-version"`,
		}
		for k, v := range want {
			if got := string(r.header.Peek(k)); got != v {
				t.Errorf("%s = %q, want %q", k, got, v)
			}
		}
	})
	t.Run("offline version redirects", func(t *testing.T) {
		r := call(t, addr, "GET", "/v0/order/9?x=1", nil, "")
		if r.status != 308 || string(r.header.Peek("Location")) != "/v2/order/9?x=1" {
			t.Fatalf("got %d Location %q", r.status, r.header.Peek("Location"))
		}
	})
	t.Run("ip lists", func(t *testing.T) {
		r := call(t, addr, "GET", "/v1/x", map[string]string{"X-Forwarded-For": "203.0.113.9"}, "")
		if r.status != 403 || !strings.Contains(r.body, `"code":403`) {
			t.Fatalf("globally denied client: %d %s", r.status, r.body)
		}
		ops := map[string]string{"Host": "db.internal.example.com"}
		if r = call(t, addr, "GET", "/ops/flush", ops, ""); r.status != 200 {
			t.Fatalf("loopback on the allow list: %d %s", r.status, r.body)
		}
		ops["X-Forwarded-For"] = "192.0.2.1"
		if r = call(t, addr, "GET", "/ops/flush", ops, ""); r.status != 403 {
			t.Fatalf("client off the allow list: %d %s", r.status, r.body)
		}
	})
	t.Run("mock round robin", func(t *testing.T) {
		a := call(t, addr, "GET", "/api/coupon/list", nil, "")
		b := call(t, addr, "GET", "/api/coupon/list", nil, "")
		if a.status != 200 || b.status != 200 || a.body == b.body {
			t.Fatalf("mock answers %q then %q", a.body, b.body)
		}
		if string(a.header.Peek("X-Mock"))+string(b.header.Peek("X-Mock")) != "yes" {
			t.Fatal("mock header missing")
		}
	})
	t.Run("fallbacks by weight", func(t *testing.T) {
		counts := map[string]int{}
		for range 400 {
			counts[call(t, addr, "GET", "/nowhere", nil, "").body]++
		}
		legacy := counts["legacy"]
		if legacy < 50 || legacy > 150 || counts["v1a"]+counts["v1b"]+legacy != 400 {
			t.Fatalf("fallback spread %v, want about 1:3 legacy:order-v1", counts)
		}
	})
}

func runValidate(cfg string) (string, error) {
	out, err := execCommand(binary, "validate", cfg)
	return out, err
}

// TestCanaryIsStickyAcrossNodesAndReloads: two gateway processes and a
// reload agree on every user's version.
func TestCanaryIsStickyAcrossNodesAndReloads(t *testing.T) {
	up := startRoutingUpstreams(t)
	src := routingConfig(t, up)
	cfg := writeConfig(t, src)
	a, b := freePort(t), freePort(t)
	pa := startProc(t, a, "off", nil, "run", "-c", cfg)
	startProc(t, b, "off", nil, "run", "-c", cfg)
	version := func(addr, user string) string {
		body := call(t, addr, "GET", "/api/order/x", map[string]string{"X-User-Id": user}, "").body
		if body == "v2" {
			return "v2"
		}
		return "v1"
	}
	const users = 2000
	first := make([]string, users)
	canary := 0
	for i := range users {
		u := fmt.Sprintf("user-%d", i)
		first[i] = version(a, u)
		if other := version(b, u); other != first[i] {
			t.Fatalf("%s: node A says %s, node B says %s", u, first[i], other)
		}
		if first[i] == "v2" {
			canary++
		}
	}
	if canary < 60 || canary > 140 {
		t.Fatalf("%d of %d users on the 5%% canary", canary, users)
	}
	// A reload (a real change elsewhere in the file) keeps every user put.
	if err := os.WriteFile(cfg, []byte(strings.Replace(src, "priority: 90", "priority: 91", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = pa.cmd.Process.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(pa.stderr.String(), "configuration reloaded") {
		if time.Now().After(deadline) {
			t.Fatal("reload not logged")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := range users {
		if v := version(a, fmt.Sprintf("user-%d", i)); v != first[i] {
			t.Fatalf("user-%d moved from %s to %s after a reload", i, first[i], v)
		}
	}
}
