package admin

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/config"
	_ "github.com/tollgate/tollgate/features"
	"github.com/tollgate/tollgate/upstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

const protectConfig = `
services:
  up:
    instances: [{addr: "127.0.0.1:1"}, {addr: "127.0.0.1:2"}]
    breaker: {min_requests: 10}
routes:
  - name: items
    match: {prefix: /items}
    breaker: {min_requests: 10}
    degrade: {status: 200, body: '{"items":[]}'}
    service: up
`

func TestProtectionEndpoints(t *testing.T) {
	f, err := config.Parse("t", []byte(protectConfig), nil)
	if err != nil {
		t.Fatal(err)
	}
	f.Defaults()
	snap, err := config.NewCompiler().Compile(f, "t")
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	s := New(Deps{Token: "tok", Snapshot: func() *config.Snapshot { return snap }, Logger: zap.New(core)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { ln.Close() })
	base := "http://" + ln.Addr().String()
	call := func(method, path, token, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, base+path, bytes.NewBufferString(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v
	}
	if st, _ := call("GET", "/admin/breakers", "", ""); st != http.StatusUnauthorized {
		t.Fatalf("breakers without the token: %d", st)
	}
	if st, v := call("GET", "/admin/breakers", "tok", ""); st != 200 || !strings.Contains(jsonOf(v), `"state":"closed"`) {
		t.Fatalf("breakers: %d %v", st, v)
	}
	if st, v := call("POST", "/admin/breakers", "tok", `{"route":"items","action":"open","reason":"drill"}`); st != 200 ||
		!strings.Contains(jsonOf(v), `"state":"open"`) {
		t.Fatalf("open route breaker: %d %v", st, v)
	}
	if st, _ := call("POST", "/admin/breakers", "tok", `{"service":"up","action":"open"}`); st != 200 || upstream.ServicesOf(snap.Env())["up"].Breaker().Status().State != "open" {
		t.Fatalf("open service breaker: %d", st)
	}
	if st, _ := call("POST", "/admin/degrade", "tok", `{"route":"items","on":true,"reason":"peak"}`); st != 200 {
		t.Fatalf("degrade on: %d", st)
	}
	if st, v := call("POST", "/admin/instances", "tok", `{"service":"up","addr":"127.0.0.1:2","enabled":false,"reason":"deploy"}`); st != 200 || v["state"] != "disabled" {
		t.Fatalf("disable instance: %d %v", st, v)
	}
	if st, _ := call("POST", "/admin/instances", "tok", `{"service":"up","addr":"127.0.0.1:9","enabled":false}`); st != http.StatusNotFound {
		t.Fatalf("unknown instance: %d", st)
	}
	if st, _ := call("POST", "/admin/degrade", "tok", `{"route":"nope","on":true}`); st != http.StatusNotFound {
		t.Fatalf("unknown route: %d", st)
	}
	st, v := call("GET", "/admin/instances", "tok", "")
	if st != 200 || v["operator_changes"] != float64(4) || !strings.Contains(jsonOf(v), `"state":"disabled"`) {
		t.Fatalf("instances: %d %v", st, v)
	}
	changes := logs.FilterMessage("operator change").All()
	if len(changes) != 4 {
		t.Fatalf("%d changes logged, want 4", len(changes))
	}
	if f := changes[2].ContextMap(); f["reason"] != "peak" || f["target"] != "route items" || f["caller"] == "" {
		t.Fatalf("a change's log line: %v", f)
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
