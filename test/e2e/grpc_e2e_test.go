//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil/grpcorders"
)

// TestGRPCTranscodedRoute: the binary in front of a real gRPC server. A
// signed, rate-limited (per tenant) route turns JSON into a gRPC call and the reply
// into JSON; an unsigned request never reaches the service; gRPC statuses
// come back as their HTTP statuses; a hung backend is answered 504 within
// the route's budget; with the backend killed the breaker opens.
func TestGRPCTranscodedRoute(t *testing.T) {
	be := grpcorders.Start(t)
	pb := filepath.Join(t.TempDir(), "orders.pb")
	if err := os.WriteFile(pb, grpcorders.DescriptorSet, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	startProc(t, addr, "off", nil, "run", "-c", writeConfig(t, fmt.Sprintf(`
watch: false
consumers:
  - {app_key: demo-app, secret: %q}
services:
  orders:
    protocol: grpc
    instances: [{addr: %q}]
    timeouts: {connect: 200ms, read: 500ms, total: 500ms}
    breaker: {window: 10s, failure_rate: 0.5, min_requests: 4, open_for: 30s}
routes:
  - name: create-order
    match: {path: /v1/orders, methods: [POST]}
    auth: signature
    limits: [{by: header.X-Tenant, rate: 5, per: 1m, burst: 5}]
    grpc: {service: shop.v1.Orders, method: Create, descriptors: %q}
    service: orders
`, demoSecret, be.Addr, pb)))

	nonce := 0
	callAs := func(tenant, body string) (int, string) {
		t.Helper()
		nonce++
		req := signed(t, addr, "POST", "/v1/orders", "", "demo-app", time.Now(), fmt.Sprintf("n-%d-%d", time.Now().UnixNano(), nonce))
		req.Header.SetContentType("application/json")
		if tenant == "" {
			tenant = fmt.Sprintf("t-%d", nonce) // a tenant of its own: never limited
		}
		req.Header.Set("X-Tenant", tenant)
		req.SetBodyString(body)
		return send(t, addr, req)
	}
	call := func(body string) (int, string) { return callAs("", body) }
	var st int
	var body string
	for try := 0; try < 50; try++ { // the listener comes up with the process
		if st, body = call(`{"sku":"abc","quantity":2,"customerId":"c-1"}`); st != 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var got map[string]any
	if st != 200 || json.Unmarshal([]byte(body), &got) != nil || got["id"] != "o-abc" || got["totalCents"] != "2500" {
		t.Fatalf("round trip: %d %s", st, body)
	}
	if md := be.LastMetadata(); len(md.Get("x-consumer")) != 1 || md.Get("x-consumer")[0] != "demo-app" {
		t.Fatalf("the backend did not learn the consumer: %v", md)
	}

	calls := be.Calls.Load()
	if st, body := rawSend(t, addr, "POST", "/v1/orders", nil, "application/json", `{"sku":"abc","quantity":1}`); st != 401 {
		t.Fatalf("unsigned: %d %s", st, body)
	}
	if be.Calls.Load() != calls {
		t.Fatal("an unsigned request reached the gRPC service")
	}

	for _, tc := range []struct {
		body   string
		status int
		grpc   string
	}{
		{`{"sku":"missing","quantity":1}`, 404, "NOT_FOUND"},
		{`{"sku":"a","quantity":0}`, 400, "INVALID_ARGUMENT"},
		{`{"sku":"boom","quantity":1}`, 500, "INTERNAL"},
	} {
		if st, body := call(tc.body); st != tc.status || !strings.Contains(body, `"grpc_status":"`+tc.grpc+`"`) {
			t.Fatalf("%s: %d %s", tc.grpc, st, body)
		}
	}
	// Five a minute for a tenant: the sixth is refused.
	limited := false
	for range 6 {
		if st, body := callAs("t-limited", `{"sku":"abc","quantity":1}`); st != 200 {
			if !strings.Contains(body, "rate limit") {
				t.Fatalf("refused for another reason: %d %s", st, body)
			}
			limited = true
		}
	}
	if !limited {
		t.Fatal("six calls passed a limit of five a minute")
	}

	start := time.Now()
	if st, body := call(`{"sku":"hang","quantity":1}`); st != 504 || time.Since(start) > 2*time.Second {
		t.Fatalf("hung backend: %d after %v: %s", st, time.Since(start), body)
	}

	be.Stop()
	time.Sleep(time.Second)
	// The window still holds the successes above: it opens once failures
	// are half of it.
	for i := 0; i < 30; i++ {
		if _, body = call(`{"sku":"abc","quantity":1}`); strings.Contains(body, "circuit breaker open") {
			return
		}
	}
	t.Fatalf("with the backend killed the breaker did not open: %s", body)
}
