package upstream_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/internal/testutil/grpcorders"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestTripleProvider: a Dubbo 3 provider serving over Triple (dubbo-go)
// is reached as a gRPC service, with nothing of its own: gRPC clients'
// calls pass through, and a grpc step transcodes JSON to it, statuses
// included.
func TestTripleProvider(t *testing.T) {
	pb := filepath.Join(t.TempDir(), "orders.pb")
	if err := os.WriteFile(pb, grpcorders.DescriptorSet, 0o600); err != nil {
		t.Fatal(err)
	}
	p := testutil.StartTripleProvider(t, pb)
	g := gatewaytest.Start(t, grpcPassRoutes+`
  - name: transcoded
    match: {path: /v1/orders, methods: [POST]}
    grpc: {service: shop.v1.Orders, method: Create, descriptors: "${PB}"}
    service: orders
`, gatewaytest.Options{Vars: map[string]string{"UP": p.Addr, "PB": pb}})

	id, _, err := h2cCreate(t, g.Addr, "t1", `{"sku":"abc","quantity":2}`)
	if err != nil || id != "o-abc" {
		t.Fatalf("passed-through call: %q %v", id, err)
	}
	if _, _, err := h2cCreate(t, g.Addr, "t2", `{"sku":"missing","quantity":1}`); status.Code(err) != codes.NotFound {
		t.Fatalf("NOT_FOUND passed through as %v", err)
	}

	post := func(body string) (int, string) {
		t.Helper()
		resp, err := http.Post("http://"+g.Addr+"/v1/orders", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := post(`{"sku":"abc","quantity":2,"customerId":"c-1"}`); st != 200 ||
		!strings.Contains(body, `"id":"o-abc"`) || !strings.Contains(body, `"totalCents":"2500"`) {
		t.Fatalf("transcoded: %d %s", st, body)
	}
	if st, body := post(`{"sku":"missing","quantity":1}`); st != 404 || !strings.Contains(body, `"grpc_status":"NOT_FOUND"`) {
		t.Fatalf("transcoded NOT_FOUND: %d %s", st, body)
	}
}
