package upstream_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/internal/testutil/grpcorders"
	"github.com/tollgate/tollgate/record"
	"github.com/tollgate/tollgate/server/h2"
	"github.com/tollgate/tollgate/upstream"
	"github.com/valyala/fasthttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// grpcRoutes transcodes /v1/orders (Create) and /v1/orders/{id} (Get) to
// the order service at ${UP}.
const grpcRoutes = `
services:
  orders:
    protocol: grpc
    instances: [{addr: "${UP}"}]
    timeouts: {connect: 200ms, read: 400ms, total: 400ms}
    breaker: {window: 10s, failure_rate: 0.5, min_requests: 4, open_for: 30s}
routes:
  - name: create
    match: {path: /v1/orders, methods: [POST]}
    grpc: {service: shop.v1.Orders, method: Create, descriptors: "${PB}"}
    service: orders
  - name: get
    match: {prefix: /v1/orders/, methods: [GET]}
    grpc: {service: shop.v1.Orders, method: Get, descriptors: "${PB}", proto_names: true}
    service: orders
`

func ordersPB(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "orders.pb")
	if err := os.WriteFile(p, grpcorders.DescriptorSet, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func doJSON(t *testing.T, addr, method, target, ct, body string) (int, map[string]any, string) {
	t.Helper()
	var req fasthttp.Request
	var resp fasthttp.Response
	req.SetRequestURI("http://" + addr + target)
	req.Header.SetMethod(method)
	if ct != "" {
		req.Header.SetContentType(ct)
	}
	if body != "" {
		req.SetBodyString(body)
	}
	if err := fasthttp.DoTimeout(&req, &resp, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	raw := string(resp.Body())
	var m map[string]any
	_ = json.Unmarshal(resp.Body(), &m)
	return resp.StatusCode(), m, raw
}

// TestGRPCTranscoding: JSON in, a gRPC call, JSON out — body, path and
// query fields; the request's mistakes refused 400 naming the field; gRPC
// statuses answered with their HTTP statuses; the gateway's forwarding
// fields sent as metadata.
func TestGRPCTranscoding(t *testing.T) {
	for _, kind := range []string{"netpoll", "fasthttp"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			be := grpcorders.Start(t)
			g := gatewaytest.Start(t, grpcRoutes, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": be.Addr, "PB": ordersPB(t)}})
			st, m, raw := doJSON(t, g.Addr, "POST", "/v1/orders", "application/json",
				`{"sku":"abc","quantity":2,"customerId":"c-1","notes":{"gift":"yes"},"tags":["x","y"]}`)
			want := `{"id":"o-abc","sku":"abc","quantity":2,"customerId":"c-1","status":"created","totalCents":"2500","notes":{"gift":"YES"},"tags":["x","y"]}`
			if st != 200 || !jsonEqual(raw, want) {
				t.Fatalf("create: %d %s", st, raw)
			}
			md := be.LastMetadata()
			for _, k := range []string{"x-request-id", "traceparent", "x-forwarded-for"} {
				if len(md.Get(k)) != 1 {
					t.Fatalf("metadata %s missing: %v", k, md)
				}
			}
			// Proto field names also accepted; path variables and query.
			st, _, raw = doJSON(t, g.Addr, "GET", "/v1/orders/o%2D7?with_items=true&limit=3&unknown=1", "", "")
			if st != 200 || !jsonEqual(raw, `{"id":"o-7","status":"shipped","quantity":3}`) {
				t.Fatalf("get: %d %s", st, raw)
			}

			for _, tc := range []struct {
				name, method, target, ct, body string
				status                         int
				mention                        string
			}{
				{"unknown field", "POST", "/v1/orders", "application/json", `{"sku":"a","colour":"red"}`, 400, "colour"},
				{"wrong type", "POST", "/v1/orders", "application/json", `{"sku":"a","quantity":"many"}`, 400, "quantity"},
				{"not JSON", "POST", "/v1/orders", "application/json", `sku=a`, 400, "invalid"},
				{"form body", "POST", "/v1/orders", "application/x-www-form-urlencoded", `sku=a`, 415, "JSON"},
				{"bad query value", "GET", "/v1/orders/o-1?limit=lots", "", "", 400, "limit"},
				{"empty id", "GET", "/v1/orders/", "", "", 404, "not one of"},
				{"NOT_FOUND", "POST", "/v1/orders", "application/json", `{"sku":"missing","quantity":1}`, 404, "NOT_FOUND"},
				{"INVALID_ARGUMENT", "POST", "/v1/orders", "application/json", `{"sku":"a","quantity":0}`, 400, "quantity must be at least 1"},
				{"INTERNAL", "POST", "/v1/orders", "application/json", `{"sku":"boom","quantity":1}`, 500, "INTERNAL"},
				{"UNAVAILABLE", "POST", "/v1/orders", "application/json", `{"sku":"busy","quantity":1}`, 503, "UNAVAILABLE"},
			} {
				calls := be.Calls.Load()
				st, m, raw := doJSON(t, g.Addr, tc.method, tc.target, tc.ct, tc.body)
				if st != tc.status || !strings.Contains(raw, tc.mention) || m["trace_id"] == nil {
					t.Fatalf("%s: %d %s, want %d mentioning %q", tc.name, st, raw, tc.status, tc.mention)
				}
				if (tc.status == 400 && tc.mention != "quantity must be at least 1" || tc.name == "empty id") && be.Calls.Load() != calls {
					t.Fatalf("%s reached the backend", tc.name)
				}
			}
			_ = m

			// A hung backend: 504 within the budget (400ms total).
			start := time.Now()
			st, _, raw = doJSON(t, g.Addr, "POST", "/v1/orders", "application/json", `{"sku":"hang","quantity":1}`)
			if d := time.Since(start); st != 504 || d > 1500*time.Millisecond {
				t.Fatalf("hung backend: %d after %v: %s", st, d, raw)
			}
		})
	}
}

// TestGRPCBackendDownOpensBreaker: with the backend gone, calls fail
// UNAVAILABLE and the service's breaker opens.
func TestGRPCBackendDownOpensBreaker(t *testing.T) {
	be := grpcorders.Start(t)
	g := gatewaytest.Start(t, grpcRoutes, gatewaytest.Options{Vars: map[string]string{"UP": be.Addr, "PB": ordersPB(t)}})
	body := `{"sku":"abc","quantity":1}`
	if st, _, raw := doJSON(t, g.Addr, "POST", "/v1/orders", "application/json", body); st != 200 {
		t.Fatalf("%d %s", st, raw)
	}
	be.Stop()
	var last string
	for i := 0; i < 20; i++ {
		_, _, last = doJSON(t, g.Addr, "POST", "/v1/orders", "application/json", body)
		if strings.Contains(last, "circuit breaker open") {
			return
		}
	}
	t.Fatalf("the breaker did not open; last answer %s", last)
}

// TestGRPCConfigErrors: what a grpc route or service is refused for.
func TestGRPCConfigErrors(t *testing.T) {
	pb := ordersPB(t)
	for name, tc := range map[string]struct{ yaml, want string }{
		"streaming":    {strings.Replace(grpcRoutes, "method: Create", "method: Watch", 1), "only unary methods"},
		"no method":    {strings.Replace(grpcRoutes, "method: Create", "method: Delete", 1), "has no method Delete"},
		"no service":   {strings.Replace(grpcRoutes, "service: shop.v1.Orders, method: Create", "service: shop.v1.Carts, method: Create", 1), "no service shop.v1.Carts"},
		"http service": {strings.Replace(grpcRoutes, "protocol: grpc", "protocol: http", 1), "speaks HTTP"},
		"split to grpc": {strings.Replace(grpcRoutes, "services:\n", "services:\n  web: {instances: [{addr: \"127.0.0.1:2\"}]}\n", 1) + `  - name: raw
    match: {prefix: /raw/}
    split: [{service: orders, percent: 50}, {service: web}]
`, "a route reaches it directly"},
		"not a set": {strings.Replace(grpcRoutes, "${PB}", "${NOTPB}", 1), "not a FileDescriptorSet"},
	} {
		t.Run(name, func(t *testing.T) {
			notpb := filepath.Join(t.TempDir(), "x.pb")
			_ = os.WriteFile(notpb, []byte("\xff\xff\xff junk"), 0o600)
			vars := map[string]string{"UP": "127.0.0.1:1", "PB": pb, "NOTPB": notpb}
			f, err := config.Parse("t.yaml", []byte(tc.yaml), func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
			if err == nil {
				f.Defaults()
				_, err = config.NewCompiler().Compile(f, "t.yaml")
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// grpcPassRoutes passes gRPC calls to shop.v1.Orders through, two a
// minute per tenant (slow enough that no token comes back during a test,
// however loaded the machine).
const grpcPassRoutes = `
services:
  orders:
    protocol: grpc
    instances: [{addr: "${UP}"}]
    timeouts: {connect: 200ms, read: 400ms, total: 400ms}
routes:
  - name: rpc
    match: {prefix: /shop.v1.Orders/}
    limits: [{by: header.X-Tenant, rate: 2, per: 1m, burst: 2}]
    service: orders
`

// TestGRPCPassThrough: a gRPC client on the HTTP/2 listener calls through
// the gateway: the route's limit applies and is answered as a gRPC status,
// backend statuses and trailers come back as sent, and a call the gateway
// has no route for is UNIMPLEMENTED.
func TestGRPCPassThrough(t *testing.T) {
	for _, kind := range []string{"netpoll", "fasthttp"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			be := grpcorders.Start(t)
			e := gatewaytest.StartH2(t, grpcPassRoutes, h2.Options{}, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": be.Addr}})
			conn, err := grpc.NewClient(e.Addr, grpc.WithTransportCredentials(credentials.NewTLS(
				&tls.Config{ServerName: "a.test", RootCAs: e.CA.Pool()})))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			d, _ := grpcorders.Files(t).FindDescriptorByName("shop.v1.Orders")
			create := d.(protoreflect.ServiceDescriptor).Methods().ByName("Create")
			call := func(tenant, method, body string) (*dynamicpb.Message, metadata.MD, error) {
				in, out := dynamicpb.NewMessage(create.Input()), dynamicpb.NewMessage(create.Output())
				if err := protojson.Unmarshal([]byte(body), in); err != nil {
					t.Fatal(err)
				}
				var trailer metadata.MD
				ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-tenant", tenant), 5*time.Second)
				defer cancel()
				err := conn.Invoke(ctx, method, in, out, grpc.Trailer(&trailer))
				return out, trailer, err
			}
			out, trailer, err := call("t1", "/shop.v1.Orders/Create", `{"sku":"abc","quantity":2}`)
			if err != nil || out.Get(out.Descriptor().Fields().ByName("id")).String() != "o-abc" {
				t.Fatalf("call: %v %v", out, err)
			}
			if got := trailer.Get("x-order-trace"); len(got) != 1 || got[0] != "t-Create" {
				t.Fatalf("trailers %v", trailer)
			}
			if md := be.LastMetadata(); len(md.Get("x-tenant")) != 1 || len(md.Get("x-request-id")) != 1 {
				t.Fatalf("backend metadata %v", md)
			}
			if _, _, err := call("t2", "/shop.v1.Orders/Create", `{"sku":"missing","quantity":1}`); status.Code(err) != codes.NotFound ||
				status.Convert(err).Message() != "no such sku" {
				t.Fatalf("NOT_FOUND passed through as %v", err)
			}
			// The route's limit: two a minute for t3.
			var codesSeen []codes.Code
			for range 3 {
				_, _, err := call("t3", "/shop.v1.Orders/Create", `{"sku":"abc","quantity":1}`)
				codesSeen = append(codesSeen, status.Code(err))
				if err != nil && !strings.Contains(status.Convert(err).Message(), "rate limit") {
					t.Fatalf("refused with %v", err)
				}
			}
			if codesSeen[0] != codes.OK || codesSeen[1] != codes.OK || codesSeen[2] != codes.ResourceExhausted {
				t.Fatalf("limited calls: %v", codesSeen)
			}
			if _, _, err := call("t4", "/shop.v1.Carts/Get", `{}`); status.Code(err) != codes.Unimplemented {
				t.Fatalf("unrouted method: %v", err)
			}
			start := time.Now()
			if _, _, err := call("t5", "/shop.v1.Orders/Create", `{"sku":"hang","quantity":1}`); status.Code(err) != codes.DeadlineExceeded ||
				time.Since(start) > 2*time.Second {
				t.Fatalf("hung backend: %v after %v", err, time.Since(start))
			}
			// Not a gRPC client: refused, not forwarded.
			calls := be.Calls.Load()
			resp, body := e.Do(t, e.Client(true), "POST", "/shop.v1.Orders/Create", []byte(`{"sku":"abc"}`), map[string]string{"Content-Type": "application/json"})
			if resp.StatusCode != 415 || be.Calls.Load() != calls {
				t.Fatalf("JSON to a pass-through route: %d %s", resp.StatusCode, body)
			}
		})
	}
}

// TestGRPCInstanceEjectedAndBack: of two gRPC instances, one killed is
// ejected; started again on its address it is probed over gRPC (the
// health service, UNIMPLEMENTED on this server, which still proves it up)
// and comes back.
func TestGRPCInstanceEjectedAndBack(t *testing.T) {
	a := grpcorders.Start(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := grpcorders.StartOn(t, ln)
	yaml := strings.Replace(grpcRoutes, `instances: [{addr: "${UP}"}]`, `instances: [{addr: "${UP}"}, {addr: "${UP2}"}]
    health: {path: /unused, interval: 100ms, timeout: 200ms, eject_after: 2, healthy_after: 1}`, 1)
	g := gatewaytest.Start(t, yaml, gatewaytest.Options{Vars: map[string]string{"UP": a.Addr, "UP2": b.Addr, "PB": ordersPB(t)}})
	instanceState := func() string {
		for _, in := range upstream.ServicesOf(g.GW.Snapshot().Env())["orders"].Instances() {
			if in.Addr == b.Addr {
				return in.Status().State
			}
		}
		return "?"
	}
	body := `{"sku":"abc","quantity":1}`
	b.Stop()
	for i := 0; i < 20 && instanceState() != "ejected"; i++ {
		doJSON(t, g.Addr, "POST", "/v1/orders", "application/json", body)
	}
	if s := instanceState(); s != "ejected" {
		t.Fatalf("the killed instance is %s", s)
	}
	ln, err = net.Listen("tcp", b.Addr)
	if err != nil {
		t.Fatal(err)
	}
	b = grpcorders.StartOn(t, ln)
	defer b.Stop()
	deadline := time.Now().Add(5 * time.Second)
	for instanceState() != "up" {
		if time.Now().After(deadline) {
			t.Fatalf("the restarted instance is still %s", instanceState())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for range 4 {
		if st, _, raw := doJSON(t, g.Addr, "POST", "/v1/orders", "application/json", body); st != 200 {
			t.Fatalf("%d %s", st, raw)
		}
	}
	if b.Calls.Load() == 0 {
		t.Fatal("the instance back in rotation got no call")
	}
}

// TestGRPCRecordingKeepsJSON: a transcoded route's recording holds the JSON
// the client sent (masked as configured) and the JSON it got, not the
// protobuf messages.
func TestGRPCRecordingKeepsJSON(t *testing.T) {
	be := grpcorders.Start(t)
	dir := t.TempDir()
	yaml := "recording: {dir: \"" + dir + "\"}\n" + strings.Replace(grpcRoutes,
		"    grpc: {service: shop.v1.Orders, method: Create, descriptors: \"${PB}\"}",
		"    grpc: {service: shop.v1.Orders, method: Create, descriptors: \"${PB}\"}\n    record: {sample: 1, mask: [json.customerId]}", 1)
	g := gatewaytest.Start(t, yaml, gatewaytest.Options{Vars: map[string]string{"UP": be.Addr, "PB": ordersPB(t)}})
	if st, _, raw := doJSON(t, g.Addr, "POST", "/v1/orders", "application/json", `{"sku":"abc","quantity":2,"customerId":"secret-c"}`); st != 200 {
		t.Fatalf("%d %s", st, raw)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
		var entries []*record.Entry
		for _, name := range files {
			f, err := os.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			_ = record.Scan(f, func(_ int, e *record.Entry, err error) error {
				if err == nil {
					entries = append(entries, e)
				}
				return nil
			})
			f.Close()
		}
		if len(entries) > 0 {
			e := entries[0]
			if !strings.Contains(e.ReqBody, `"sku":"abc"`) || strings.Contains(e.ReqBody, "secret-c") ||
				!strings.Contains(e.RespBody, `"id":"o-abc"`) || e.Status != 200 {
				t.Fatalf("recorded %+v", e)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing recorded")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestGRPCOverTLS: a service with a tls block reaches its instance over
// TLS, checking its certificate against the given CA and name; without
// the CA the call fails (UNAVAILABLE) rather than going unverified.
func TestGRPCOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testutil.NewTestCA(t)
	cert, key := ca.Issue(t, dir, "orders", "O", "orders.test")
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	be := grpcorders.StartTLS(t, cert, key)
	tlsRoutes := strings.Replace(grpcRoutes, "    protocol: grpc\n", "    protocol: grpc\n    tls: {ca_file: \"${CA}\", server_name: orders.test}\n", 1)
	g := gatewaytest.Start(t, tlsRoutes, gatewaytest.Options{Vars: map[string]string{"UP": be.Addr, "PB": ordersPB(t), "CA": caFile}})
	if st, _, raw := doJSON(t, g.Addr, "POST", "/v1/orders", "application/json", `{"sku":"abc","quantity":1}`); st != 200 ||
		!strings.Contains(raw, `"id":"o-abc"`) {
		t.Fatalf("over TLS: %d %s", st, raw)
	}
	// Made on the event loop (grpc-go's client would add its name to the
	// user agent), many at once over one session.
	if ua := be.LastMetadata()["user-agent"]; len(ua) != 1 || ua[0] != "tollgate" {
		t.Fatalf("the call was not made on the loop: user-agent %q", ua)
	}
	var wg sync.WaitGroup
	for w := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				sku := fmt.Sprintf("t%d-%d", w, i)
				if st, body, raw := doJSON(t, g.Addr, "POST", "/v1/orders", "application/json", `{"sku":"`+sku+`","quantity":1}`); st != 200 || body["id"] != "o-"+sku {
					t.Errorf("%s over TLS: %d %s", sku, st, raw)
				}
			}
		}()
	}
	wg.Wait()
	// A TLS server that does not speak h2 (no ALPN h2) is refused.
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	h1, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}}) // no ALPN at all
	if err != nil {
		t.Fatal(err)
	}
	defer h1.Close()
	go func() {
		for {
			c, err := h1.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	g3 := gatewaytest.Start(t, tlsRoutes, gatewaytest.Options{Vars: map[string]string{"UP": h1.Addr().String(), "PB": ordersPB(t), "CA": caFile}})
	if st, _, raw := doJSON(t, g3.Addr, "POST", "/v1/orders", "application/json", `{"sku":"abc","quantity":1}`); st != 503 ||
		!strings.Contains(raw, "did not agree to HTTP/2") {
		t.Fatalf("a backend without h2: %d %s", st, raw)
	}

	// The system's roots do not know the test CA.
	untrusted := strings.Replace(grpcRoutes, "    protocol: grpc\n", "    protocol: grpc\n    tls: {server_name: orders.test}\n", 1)
	g2 := gatewaytest.Start(t, untrusted, gatewaytest.Options{Vars: map[string]string{"UP": be.Addr, "PB": ordersPB(t)}})
	calls := be.Calls.Load()
	if st, _, raw := doJSON(t, g2.Addr, "POST", "/v1/orders", "application/json", `{"sku":"abc","quantity":1}`); st != 503 ||
		be.Calls.Load() != calls {
		t.Fatalf("an unverified backend was called: %d %s", st, raw)
	}
}

// TestGRPCDescriptorsReadOnLoad: the descriptor set is read again by every
// configuration load: a set changed on disk is what the next load sees.
func TestGRPCDescriptorsReadOnLoad(t *testing.T) {
	pb := ordersPB(t)
	vars := map[string]string{"UP": "127.0.0.1:1", "PB": pb}
	compile := func() error {
		f, err := config.Parse("t.yaml", []byte(grpcRoutes), func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
		if err != nil {
			return err
		}
		f.Defaults()
		_, err = config.NewCompiler().Compile(f, "t.yaml")
		return err
	}
	if err := compile(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pb, []byte("not a descriptor set"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := compile(); err == nil || !strings.Contains(err.Error(), "not a FileDescriptorSet") {
		t.Fatalf("a broken set on disk was not seen by the next load: %v", err)
	}
	if err := os.WriteFile(pb, grpcorders.DescriptorSet, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := compile(); err != nil {
		t.Fatalf("the set restored: %v", err)
	}
}

// TestGRPCCallSurvivesReload: a reload that drops the service leaves the
// calls already running on its instance to finish (closing a gRPC
// connection would cancel them).
func TestGRPCCallSurvivesReload(t *testing.T) {
	be := grpcorders.Start(t)
	g := gatewaytest.Start(t, strings.Replace(grpcRoutes, "read: 400ms, total: 400ms", "read: 2s, total: 2s", 1), gatewaytest.Options{Vars: map[string]string{"UP": be.Addr, "PB": ordersPB(t)}})
	done := make(chan string, 1)
	go func() {
		st, _, raw := doJSON(t, g.Addr, "POST", "/v1/orders", "application/json", `{"sku":"slow","quantity":1}`)
		done <- fmt.Sprint(st, " ", raw)
	}()
	time.Sleep(100 * time.Millisecond) // the call is running
	f, err := config.Parse("t.yaml", []byte(`
services:
  other: {instances: [{addr: "127.0.0.1:1"}]}
routes:
  - {name: r, match: {prefix: /}, service: other}
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	f.Defaults()
	next, err := g.Compiler.Compile(f, "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g.GW.Swap(next)
	g.Compiler.Release(next) // the orders instance is dropped here
	if got := <-done; !strings.HasPrefix(got, "200 ") {
		t.Fatalf("the call running across the reload got %s", got)
	}
}
