package server

import (
	_ "github.com/tollgate/tollgate/features"

	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/testutil"
)

var transports = []string{"netpoll", "fasthttp"}

// testGateway is a gateway on a real loopback socket.
type testGateway struct {
	Addr      string
	GW        *Gateway
	Transport Transport
	Compiler  *config.Compiler
}

// startGateway compiles yaml (with ${UP}-style references resolved from
// vars) and serves it with the named transport until the test ends.
func startGateway(t testing.TB, kind, yaml string, vars map[string]string, tweak func(*Options)) *testGateway {
	t.Helper()
	lookup := func(k string) (string, bool) {
		if v, ok := vars[k]; ok {
			return v, true
		}
		return os.LookupEnv(k)
	}
	c := config.NewCompiler()
	f, err := config.Parse("test.yaml", []byte(yaml), lookup)
	if err != nil {
		t.Fatal(err)
	}
	f.Defaults()
	snap, err := c.Compile(f, "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	gw := NewGateway(snap, nil)
	o := OptionsFor(f)
	if tweak != nil {
		tweak(&o)
	}
	var h Handler = gw
	if o.TLS != nil {
		h = gw.Secure()
	}
	tr, err := NewTransport(kind, h, o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tr.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("transport did not stop")
		}
	})
	return &testGateway{Addr: ln.Addr().String(), GW: gw, Transport: tr, Compiler: c}
}

// startWithRecorder serves yaml, its ${UP} a recording upstream.
func startWithRecorder(t *testing.T, kind, yaml string) (*testGateway, *testutil.RecordingUpstream) {
	t.Helper()
	up := testutil.StartRecordingUpstream(t)
	return startGateway(t, kind, yaml, map[string]string{"UP": up.Addr}, nil), up
}

// oneService is a config routing everything to ${UP}.
const oneService = `
services:
  up:
    instances: [{addr: "${UP}"}]
    timeouts: {connect: 500ms, read: 1s, total: 2s}
routes:
  - name: all
    match: {prefix: /}
    service: up
`

func hasJSONCode(body []byte, code string) bool {
	return strings.HasPrefix(string(body), `{"code":`+code+`,"message":`) && strings.Contains(string(body), `"trace_id":"`)
}
