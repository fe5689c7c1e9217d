package server_test

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/pipeline"
)

// counterFeature is a throwaway feature defined here, in a test, and
// plugged in through the registry alone: no edit to config, server or cmd.
// It counts a route's requests in reload-surviving state and returns the
// count in a response header.
type counterConfig struct {
	Header string `yaml:"header"`
}

type counter struct {
	header string
	n      *atomic.Int64
}

func (f *counter) Handle(*pipeline.Ctx) pipeline.Verdict { return pipeline.Continue }

func (f *counter) HandleResponse(c *pipeline.Ctx) {
	c.Scratch = strconv.AppendInt(c.Scratch[:0], f.n.Add(1), 10)
	c.Resp.Header.Set(f.header, string(c.Scratch))
}

var registerCounter sync.Once

func TestFeatureThroughRegistryAlone(t *testing.T) {
	registerCounter.Do(func() {
		pipeline.Register(pipeline.Feature{
			Key: "test_counter", Stage: pipeline.StageMark, Scope: pipeline.ScopeRoute,
			Config: func() any { return new(counterConfig) },
			Build: func(b *pipeline.Build, cfg any) (pipeline.Filter, error) {
				h := cfg.(*counterConfig).Header
				// Keyed by the route and a digest of the settings: unchanged
				// settings find the same counter after a reload.
				n := b.State.Get("test_counter|"+b.Route.Name+"|"+h, func() (any, func()) { return new(atomic.Int64), nil })
				return &counter{header: h, n: n.(*atomic.Int64)}, nil
			},
		})
	})
	const cfg = `
services:
  up: {instances: [{addr: "${UP}"}]}
routes:
  - name: counted
    match: {prefix: /}
    test_counter: {header: %s}
    service: up
`
	up := testutil.StartUpstream(t, "ok")
	yaml := func(h string) string { return fmt.Sprintf(cfg, h) }
	g := gatewaytest.Start(t, yaml("X-Count"), gatewaytest.Options{Vars: map[string]string{"UP": up.Addr}})
	get := func(h string) string {
		res := testutil.RawExchange(t, g.Addr, []byte("GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"), 1, 2*time.Second)
		if len(res.Responses) != 1 || res.Responses[0].StatusCode() != 200 {
			t.Fatalf("answers %v", res.Statuses())
		}
		return string(res.Responses[0].Header.Peek(h))
	}
	if get("X-Count") != "1" || get("X-Count") != "2" {
		t.Fatal("the feature did not run on the route")
	}
	reload := func(h string) {
		f, err := config.Parse("t", []byte(yaml(h)), func(string) (string, bool) { return up.Addr, true })
		if err != nil {
			t.Fatal(err)
		}
		f.Defaults()
		snap, err := g.Compiler.Compile(f, "t")
		if err != nil {
			t.Fatal(err)
		}
		g.GW.Swap(snap)
		g.Compiler.Release(snap)
	}
	reload("X-Count") // unchanged: the same counter goes on
	if got := get("X-Count"); got != "3" {
		t.Fatalf("after an unchanged reload the count is %s, want 3", got)
	}
	reload("X-Other") // changed: fresh state
	if got := get("X-Other"); got != "1" {
		t.Fatalf("after a changed reload the count is %s, want 1", got)
	}
	// An unknown key is still refused with its line.
	if _, err := config.Parse("t", []byte("routes:\n  - name: a\n    test_countr: {}\n"), nil); err == nil {
		t.Fatal("a misspelt feature key was accepted")
	}
}

type countingObserver struct{ n atomic.Int64 }

func (o *countingObserver) Observe(c *pipeline.Ctx, _ time.Time) {
	if c.Resp.StatusCode() != 0 {
		o.n.Add(1)
	}
}

// TestObserversSeeEveryRequest: an observer added to the gateway sees
// answered and refused requests alike.
func TestObserversSeeEveryRequest(t *testing.T) {
	up := testutil.StartUpstream(t, "ok")
	g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Vars: map[string]string{"UP": up.Addr}})
	var o countingObserver
	g.GW.AddObserver(&o)
	testutil.RawExchange(t, g.Addr, []byte("GET /x HTTP/1.1\r\nHost: h\r\n\r\nGET /%zz HTTP/1.1\r\nHost: h\r\n\r\n"), 2, 2*time.Second)
	if n := o.n.Load(); n != 2 {
		t.Fatalf("observer saw %d requests, want 2", n)
	}
}
