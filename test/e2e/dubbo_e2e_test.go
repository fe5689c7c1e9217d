//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
)

// TestDubboRoutes: the binary in front of a real Dubbo provider (dubbo-go,
// Dubbo 2 protocol, hessian2), written in the file and found through
// discovery. JSON in, JSON out, with a POJO argument and result; a signed, rate-limited route never lets an unsigned request
// through; the consumer, trace context and a chosen header reach the
// provider as attachments; an exception comes back as its mapped status;
// a hung provider is answered 504 within the budget; with the provider
// killed the breaker opens.
func TestDubboRoutes(t *testing.T) {
	p := testutil.StartDubboProvider(t, time.Minute)
	// The same provider, also found through file discovery.
	found := filepath.Join(t.TempDir(), "orders.yaml")
	if err := os.WriteFile(found, []byte(fmt.Sprintf("- {addr: %q}\n", p.Addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	startProc(t, addr, "off", nil, "run", "-c", writeConfig(t, fmt.Sprintf(`
watch: false
consumers:
  - {app_key: demo-app, secret: %q}
services:
  orders:
    protocol: dubbo
    instances: [{addr: %q}]
    timeouts: {connect: 200ms, read: 500ms, total: 500ms}
    breaker: {window: 10s, failure_rate: 0.5, min_requests: 4, open_for: 30s}
  found:
    protocol: dubbo
    discover: {from: file, name: %q}
routes:
  - name: found
    match: {path: /v1/found, methods: [GET]}
    dubbo: {interface: com.shop.OrderService, method: getOrder, version: 1.0.0, group: g1, params: [{type: java.lang.String, from: query.id}]}
    service: found
  - name: get-order
    match: {path: /v1/orders, methods: [GET]}
    dubbo:
      interface: com.shop.OrderService
      method: getOrder
      version: 1.0.0
      group: g1
      params: [{type: java.lang.String, from: query.id}]
    service: orders
  - name: find-orders
    match: {path: /v1/orders/find, methods: [POST]}
    auth: signature
    limits: [{by: header.X-Tenant, rate: 5, per: 1m, burst: 5}]
    dubbo:
      interface: com.shop.OrderService
      method: findOrders
      version: 1.0.0
      group: g1
      params: [{type: com.shop.OrderQuery, from: json}]
    service: orders
  - name: fail
    match: {path: /v1/fail, methods: [GET]}
    dubbo:
      interface: com.shop.OrderService
      method: fail
      version: 1.0.0
      group: g1
      params: [{type: java.lang.String, from: query.id}]
      exceptions: {com.shop.NotFound: 404}
    service: orders
  - name: hang
    match: {path: /v1/hang, methods: [GET]}
    dubbo: {interface: com.shop.OrderService, method: hang, version: 1.0.0, group: g1, params: [{type: java.lang.String, from: query.id}]}
    service: orders
  - name: attachment
    match: {path: /v1/attachment, methods: [GET]}
    dubbo:
      interface: com.shop.OrderService
      method: attachment
      version: 1.0.0
      group: g1
      params: [{type: java.lang.String, from: query.key}]
      headers: [X-Tenant]
    service: orders
`, demoSecret, p.Addr, found)))

	get := func(path string, header ...string) (int, string) {
		t.Helper()
		h := http.Header{}
		for i := 0; i+1 < len(header); i += 2 {
			h.Set(header[i], header[i+1])
		}
		return rawSend(t, addr, "GET", path, h, "", "")
	}
	st, body := get("/v1/orders?id=o-42")
	var order map[string]any
	if st != 200 || json.Unmarshal([]byte(body), &order) != nil || order["id"] != "o-42" || order["customer"] != "c-o-42" {
		t.Fatalf("getOrder: %d %s", st, body)
	}

	var st2 int
	for try := 0; try < 100; try++ { // discovery reads the file as the gateway starts
		if st2, body = get("/v1/found?id=o-5"); st2 == 200 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st2 != 200 || json.Unmarshal([]byte(body), &order) != nil || order["id"] != "o-5" {
		t.Fatalf("getOrder on a discovered instance: %d %s", st2, body)
	}

	nonce := 0
	findAs := func(tenant, query string) (int, string) {
		t.Helper()
		nonce++
		req := signed(t, addr, "POST", "/v1/orders/find", "", "demo-app", time.Now(), fmt.Sprintf("n-%d-%d", time.Now().UnixNano(), nonce))
		req.Header.SetContentType("application/json")
		if tenant == "" {
			tenant = fmt.Sprintf("t-%d", nonce) // a tenant of its own: never limited
		}
		req.Header.Set("X-Tenant", tenant)
		req.SetBodyString(query)
		return send(t, addr, req)
	}
	st, body = findAs("", `{"customer":"ann","items":["a","b","c"],"limit":4}`)
	if st != 200 || json.Unmarshal([]byte(body), &order) != nil || order["id"] != "ann-4" || order["total"] != 6.75 {
		t.Fatalf("findOrders: %d %s", st, body)
	}
	if st, body := rawSend(t, addr, "POST", "/v1/orders/find", nil, "application/json", `{"customer":"x"}`); st != 401 {
		t.Fatalf("unsigned: %d %s", st, body)
	}
	if st, body := findAs("", `{"customer":`); st != 400 {
		t.Fatalf("malformed JSON: %d %s", st, body)
	}
	limited := false
	for range 6 {
		if st, body := findAs("t-limited", `{"customer":"ann","limit":1}`); st != 200 {
			if !strings.Contains(body, "rate limit") {
				t.Fatalf("refused for another reason: %d %s", st, body)
			}
			limited = true
		}
	}
	if !limited {
		t.Fatal("six calls passed a limit of five a minute")
	}

	st, body = get("/v1/attachment?key=x-tenant", "X-Tenant", "acme")
	if st != 200 || body != `"acme"` {
		t.Fatalf("the chosen header did not reach the provider: %d %s", st, body)
	}
	tp := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	st, body = get("/v1/attachment?key=traceparent", "traceparent", tp)
	if st != 200 || !strings.HasPrefix(body, `"00-0af7651916cd43dd8448eb211c80319c-`) {
		t.Fatalf("the trace did not reach the provider: %d %s", st, body)
	}

	if st, body := get("/v1/fail?id=o-9"); st != 404 || !strings.Contains(body, `"exception":"com.shop.NotFound"`) ||
		!strings.Contains(body, "order o-9 not found") {
		t.Fatalf("exception: %d %s", st, body)
	}

	start := time.Now()
	if st, body := get("/v1/hang?id=o-1"); st != 504 || time.Since(start) > 2*time.Second {
		t.Fatalf("hung provider: %d after %v: %s", st, time.Since(start), body)
	}

	p.Kill()
	for i := 0; i < 30; i++ {
		if st, body = get("/v1/orders?id=o-1"); strings.Contains(body, "circuit breaker open") {
			return
		}
		if st != 502 && st != 503 {
			t.Fatalf("with the provider killed: %d %s", st, body)
		}
	}
	t.Fatalf("with the provider killed the breaker did not open: %d %s", st, body)
}
