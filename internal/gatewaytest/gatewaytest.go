// Package gatewaytest starts a real gateway for tests: a configuration
// compiled as the process compiles it, served by a chosen transport on a
// loopback listener, stopped when the test ends. Every package whose tests
// need a whole gateway starts it here, so a change to how the gateway is
// put together is made once.
//
// The package registers no features but the services (package upstream's
// upstream and services sections, which nearly every configuration names):
// a test imports github.com/tollgate/tollgate/features (or its own
// package's) for the filters its configuration names. It imports server
// and upstream, so only tests that neither imports can use it: external
// test packages (package foo_test), or internal tests of packages outside
// their imports.
package gatewaytest

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/server"
	"github.com/tollgate/tollgate/server/h2"
	"github.com/tollgate/tollgate/server/transport"
	_ "github.com/tollgate/tollgate/upstream" // the services sections
)

// Transports are the transports a gateway can run on; a test of behaviour
// every transport must share runs on each.
var Transports = []string{"reactor", "fasthttp"}

// Options choose how Start serves a configuration. The zero value serves
// on the default transport with ${NAME} references taken from the
// environment.
type Options struct {
	// Transport names the transport (one of Transports); "" is reactor,
	// the default.
	Transport string
	// Vars resolve ${NAME} references in the configuration before the
	// environment does.
	Vars map[string]string
	// Tweak changes the transport settings taken from the configuration
	// before the transport starts.
	Tweak func(*server.Options)
}

// Gateway is a gateway serving on a loopback socket until its test ends.
type Gateway struct {
	Addr      string
	GW        *server.Gateway
	Transport server.Transport
	// Compiler compiled the configuration; a test reloads through it.
	Compiler *config.Compiler
	File     *config.File
	// H2C serves the connections that open with the HTTP/2 preface; nil
	// with client.h2c off.
	H2C *h2.Server
}

// Start parses and compiles yaml and serves it.
func Start(tb testing.TB, yaml string, o Options) *Gateway {
	tb.Helper()
	f, err := config.Parse("test.yaml", []byte(yaml), lookup(o.Vars))
	if err != nil {
		tb.Fatal(err)
	}
	f.Defaults()
	return StartFile(tb, f, o)
}

// StartFile compiles f, with its defaults applied, and serves it: the
// snapshot goes live as the process's first does, the transport takes its
// settings from f, and the test's cleanup shuts the transport down and
// closes the compiler.
func StartFile(tb testing.TB, f *config.File, o Options) *Gateway {
	tb.Helper()
	comp := config.NewCompiler()
	snap, err := comp.Compile(f, "test.yaml")
	if err != nil {
		comp.Close()
		tb.Fatal(err)
	}
	comp.Release(snap)
	gw := server.NewGateway(snap, nil)
	opts := server.OptionsFor(f)
	// The cleartext listener's HTTP/2 (h2c), as the process serves it; a
	// Tweak that sets TLS replaces it with its own or none.
	h2c := server.HTTP2CleartextFor(f, nil)
	if h2c != nil {
		opts.HTTP2 = h2c
	}
	if o.Tweak != nil {
		o.Tweak(&opts)
	}
	if opts.TLS != nil && opts.HTTP2 == transport.ConnServer(h2c) {
		opts.HTTP2, h2c = nil, nil // a TLS listener offers h2 by its own server only
	}
	var h server.Handler = gw
	if opts.TLS != nil {
		h = gw.Secure()
	}
	kind := o.Transport
	if kind == "" {
		kind = "netpoll"
	}
	tr, err := server.NewTransport(kind, h, opts)
	if err != nil {
		comp.Close()
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		comp.Close()
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tr.Serve(ln) }()
	tb.Cleanup(func() {
		defer comp.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			tb.Error("transport did not stop")
		}
	})
	return &Gateway{Addr: ln.Addr().String(), GW: gw, Transport: tr, Compiler: comp, File: f, H2C: h2c}
}

// StartRecorded serves yaml with ${UP} a recording upstream, which it
// returns with the gateway.
func StartRecorded(tb testing.TB, yaml string, o Options) (*Gateway, *testutil.RecordingUpstream) {
	tb.Helper()
	up := testutil.StartRecordingUpstream(tb)
	vars := map[string]string{"UP": up.Addr}
	for k, v := range o.Vars {
		vars[k] = v
	}
	o.Vars = vars
	return Start(tb, yaml, o), up
}

// OneService is a configuration routing every request to ${UP}.
const OneService = `
services:
  up:
    instances: [{addr: "${UP}"}]
    timeouts: {connect: 500ms, read: 1s, total: 2s}
routes:
  - name: all
    match: {prefix: /}
    service: up
`

func lookup(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		if v, ok := vars[k]; ok {
			return v, true
		}
		return os.LookupEnv(k)
	}
}

// URL is the gateway's address for path.
func (g *Gateway) URL(path string) string { return "http://" + g.Addr + path }

// Raw writes raw to the gateway as it is and reads up to want answers
// within wait (see testutil.RawExchange).
func (g *Gateway) Raw(tb testing.TB, raw string, want int, wait time.Duration) testutil.RawResult {
	tb.Helper()
	return testutil.RawExchange(tb, g.Addr, []byte(raw), want, wait)
}

// Get sends GET path to the gateway and returns the status and body.
func (g *Gateway) Get(tb testing.TB, path string) (int, string) {
	tb.Helper()
	return testutil.Get(tb, g.URL(path))
}

// HasJSONCode reports whether body is the gateway's JSON error answer with
// code, carrying a trace id.
func HasJSONCode(body []byte, code string) bool {
	return strings.HasPrefix(string(body), `{"code":`+code+`,"message":`) && strings.Contains(string(body), `"trace_id":"`)
}

// Serve serves tr on a loopback listener until the test ends, and returns
// its address.
func Serve(tb testing.TB, tr server.Transport) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	return ServeOn(tb, tr, ln)
}

// ServeOn serves ln with tr until the test ends, and returns its address;
// the cleanup fails the test when tr does not shut down cleanly.
func ServeOn(tb testing.TB, tr server.Transport, ln net.Listener) string {
	tb.Helper()
	served := make(chan error, 1)
	go func() { served <- tr.Serve(ln) }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tr.Shutdown(ctx); err != nil {
			tb.Errorf("shutdown: %v", err)
		}
		select {
		case err := <-served:
			if err != nil {
				tb.Errorf("serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			tb.Errorf("Serve did not return after Shutdown")
		}
	})
	return ln.Addr().String()
}
