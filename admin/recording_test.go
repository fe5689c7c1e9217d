package admin

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/config"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

const recordingConfig = `
recording: {dir: "/nonexistent/never-written"}
services:
  up: {instances: [{addr: "127.0.0.1:1"}]}
  shadow: {instances: [{addr: "127.0.0.1:2"}]}
routes:
  - name: orders
    match: {prefix: /orders}
    record: {sample: 0.5}
    mirror: {service: shadow, sample: 0.1}
    service: up
  - name: other
    match: {prefix: /}
    service: up
`

func TestRecordingEndpoints(t *testing.T) {
	f, err := config.Parse("t", []byte(recordingConfig), nil)
	if err != nil {
		t.Fatal(err)
	}
	f.Defaults()
	comp := config.NewCompiler()
	snap, err := comp.Compile(f, "t")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { comp.Discard(snap) })
	core, logs := observer.New(zap.InfoLevel)
	s := New(Deps{Token: "tok", Snapshot: func() *config.Snapshot { return snap }, Logger: zap.New(core)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { ln.Close() })
	call := func(method, token, body string) (int, string) {
		req, _ := http.NewRequest(method, "http://"+ln.Addr().String()+"/admin/recording", bytes.NewBufferString(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v any
		_ = json.NewDecoder(resp.Body).Decode(&v)
		out, _ := json.Marshal(v)
		return resp.StatusCode, string(out)
	}
	if st, _ := call("GET", "", ""); st != http.StatusUnauthorized {
		t.Fatalf("GET without the token: %d", st)
	}
	st, v := call("GET", "tok", "")
	if st != 200 || !strings.Contains(v, `"orders":{"dropped":0,"on":true,"queued":0,"sample":0.5}`) ||
		!strings.Contains(v, `"dir":"/nonexistent/never-written"`) || !strings.Contains(v, `"mirrors":{"orders":{`) {
		t.Fatalf("GET: %d %s", st, v)
	}
	if st, _ := call("POST", "", `{"route":"orders","on":false}`); st != http.StatusUnauthorized {
		t.Fatalf("POST without the token: %d", st)
	}
	if st, v := call("POST", "tok", `{"route":"orders","on":false,"reason":"incident 42"}`); st != 200 || v != `{"on":false,"route":"orders","was":true}` {
		t.Fatalf("switch off: %d %s", st, v)
	}
	if _, v := call("GET", "tok", ""); !strings.Contains(v, `"orders":{"dropped":0,"on":false`) {
		t.Fatalf("after switching off: %s", v)
	}
	if st, _ := call("POST", "tok", `{"route":"other","on":true}`); st != http.StatusNotFound {
		t.Fatalf("a route without a record rule: %d", st)
	}
	if st, _ := call("POST", "tok", `{"route":"orders"}`); st != http.StatusBadRequest {
		t.Fatalf("without on: %d", st)
	}
	if logs.FilterMessage("operator change").FilterField(zap.String("change", "recording off")).Len() != 1 {
		t.Fatalf("the change was not logged: %v", logs.All())
	}
}
