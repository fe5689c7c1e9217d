package file_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/upstream"
	"github.com/valyala/fasthttp"

	_ "github.com/tollgate/tollgate/features"
)

// writeSet replaces the instance file the way a deploy tool should:
// written aside, renamed over.
func writeSet(t *testing.T, path, yaml string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// served sends n requests and counts the answers by body (the upstreams
// answer their names) and by status.
func served(t *testing.T, g *gatewaytest.Gateway, n int, prepare func(*fasthttp.Request)) map[string]int {
	t.Helper()
	out := map[string]int{}
	for range n {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		req.SetRequestURI(g.URL("/x"))
		if prepare != nil {
			prepare(req)
		}
		if err := fasthttp.DoTimeout(req, resp, 3*time.Second); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode() == 200 {
			out[string(resp.Body())]++
		} else {
			out[fmt.Sprintf("%dxx", resp.StatusCode()/100)]++
		}
		fasthttp.ReleaseRequest(req)
		fasthttp.ReleaseResponse(resp)
	}
	return out
}

func discovered(dir, list string) string {
	return `
discovery:
  cache_dir: ` + dir + `/saved
  empty_grace: 400ms
  file: {interval: 20ms}
services:
  orders:
    discover: {from: file, name: ` + list + `}
    timeouts: {connect: 300ms, read: 1s, total: 2s}
routes:
  - name: all
    match: {prefix: /}
    service: orders
`
}

func TestInstancesFollowTheFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	list := filepath.Join(dir, "orders.yaml")
	a, b, c := testutil.StartUpstream(t, "a"), testutil.StartUpstream(t, "b"), testutil.StartUpstream(t, "c")
	writeSet(t, list, "[{addr: "+a.Addr+"}, {addr: "+b.Addr+", weight: 3}]")
	g := gatewaytest.Start(t, discovered(dir, list), gatewaytest.Options{})

	got := served(t, g, 40, nil)
	if got["a"] != 10 || got["b"] != 30 || got["c"] != 0 {
		t.Fatalf("weights 1:3 over a and b served %v", got)
	}
	instanceOf := func(addr string) any {
		for _, in := range upstream.ServicesOf(g.GW.Snapshot().Env())["orders"].Instances() {
			if in.Addr == addr {
				return in
			}
		}
		return nil
	}
	aBefore := instanceOf(a.Addr)

	// b leaves, c comes: c is served within the interval, a and b's
	// instances are the same objects (their pools and health stay).
	writeSet(t, list, "[{addr: "+a.Addr+"}, {addr: "+c.Addr+"}]")
	testutil.Eventually(t, 5*time.Second, "c served", func() bool { return served(t, g, 4, nil)["c"] > 0 })
	bSeen := b.Requests.Load()
	if got := served(t, g, 40, nil); got["a"] != 20 || got["c"] != 20 || b.Requests.Load() != bSeen {
		t.Fatalf("after the change: %v, b got %d more", got, b.Requests.Load()-bSeen)
	}
	if instanceOf(a.Addr) != aBefore {
		t.Fatal("a's instance was replaced by a set change")
	}

	// A reload of the same configuration keeps the watch and the
	// instances.
	next, err := g.Compiler.Compile(g.File, "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g.Compiler.Release(next)
	old := g.GW.Swap(next)
	if upstream.ServicesOf(next.Env())["orders"].Instances()[0] != upstream.ServicesOf(old.Env())["orders"].Instances()[0] {
		t.Fatal("a reload replaced a discovered instance")
	}

	// A file that does not parse, or is gone, is a failure: the set stays.
	writeSet(t, list, "[{addr: ")
	time.Sleep(100 * time.Millisecond)
	if got := served(t, g, 10, nil); got["a"]+got["c"] != 10 {
		t.Fatalf("a broken file changed the set: %v", got)
	}
	os.Remove(list)
	time.Sleep(100 * time.Millisecond)
	if got := served(t, g, 10, nil); got["a"]+got["c"] != 10 {
		t.Fatalf("a missing file changed the set: %v", got)
	}

	// An empty list empties the service after the grace, not before.
	writeSet(t, list, "[]")
	time.Sleep(100 * time.Millisecond)
	if got := served(t, g, 10, nil); got["a"]+got["c"] != 10 {
		t.Fatalf("an empty list emptied the service before the grace: %v", got)
	}
	testutil.Eventually(t, 5*time.Second, "emptied after the grace", func() bool { return served(t, g, 1, nil)["5xx"] == 1 })
}

func TestARestartDuringAnOutageServesTheSavedSet(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	list := filepath.Join(dir, "orders.yaml")
	a := testutil.StartUpstream(t, "a")
	writeSet(t, list, "[{addr: "+a.Addr+"}]")
	first := gatewaytest.Start(t, discovered(dir, list), gatewaytest.Options{})
	if got := served(t, first, 5, nil); got["a"] != 5 {
		t.Fatalf("first node served %v", got)
	}
	first.Compiler.Close()

	// The registry is down (the file is gone) when the second starts.
	os.Remove(list)
	second := gatewaytest.Start(t, discovered(dir, list), gatewaytest.Options{})
	if got := served(t, second, 20, nil); got["a"] != 20 {
		t.Fatalf("the restarted node served %v from its saved set", got)
	}
}

func TestCanaryFollowsMetadata(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	list := filepath.Join(dir, "orders.yaml")
	v1, v2, v2b := testutil.StartUpstream(t, "v1"), testutil.StartUpstream(t, "v2"), testutil.StartUpstream(t, "v2b")
	writeSet(t, list, "[{addr: "+v1.Addr+", meta: {version: v1}}, {addr: "+v2.Addr+", meta: {version: v2}}]")
	cfg := strings.Replace(discovered(dir, list), "    service: orders\n", `    split:
      - {service: orders, metadata: {version: v1}, percent: 80}
      - {service: orders, metadata: {version: v2}}
    split_force: {header: X-Canary}
`, 1)
	g := gatewaytest.Start(t, cfg, gatewaytest.Options{})
	got := served(t, g, 200, nil)
	if got["v1"]+got["v2"] != 200 || got["v2"] < 20 || got["v2"] > 60 {
		t.Fatalf("80/20 by metadata served %v", got)
	}
	force := func(r *fasthttp.Request) { r.Header.Set("X-Canary", "orders@version=v2") }
	if got := served(t, g, 10, force); got["v2"] != 10 {
		t.Fatalf("forced to the canary: %v", got)
	}
	// The deploy re-registers the canary elsewhere: the share follows.
	writeSet(t, list, "[{addr: "+v1.Addr+", meta: {version: v1}}, {addr: "+v2b.Addr+", meta: {version: v2}}]")
	testutil.Eventually(t, 5*time.Second, "the canary share on the new instance", func() bool { return served(t, g, 1, force)["v2b"] == 1 })
	if got := served(t, g, 10, force); got["v2b"] != 10 {
		t.Fatalf("forced after the re-registration: %v", got)
	}
}

func TestDiscoverSettingsAreChecked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for cfg, want := range map[string]string{
		"services:\n  s:\n    discover: {from: nowhere, name: x}\n":                                        `unknown provider "nowhere"`,
		"services:\n  s:\n    discover: {from: file}\n":                                                    "name is empty",
		"services:\n  s:\n    discover: {from: file, name: relative.yaml}\n":                               "absolute path",
		"services:\n  s:\n    discover: {from: file, name: /x, colour: red}\n":                             `unknown setting "colour"`,
		"services:\n  s:\n    instances: [{addr: \"1.2.3.4:80\"}]\n    discover: {from: file, name: /x}\n": "exclude each other",
		"discovery:\n  file: {interval: 1ms}\n":                                                            "interval",
		"discovery:\n  zookeeper: {}\n":                                                                    `unknown setting "discovery.zookeeper"`,
	} {
		cfg = "discovery:\n  cache_dir: " + dir + "\n" + strings.TrimPrefix(cfg, "discovery:\n")
		err := gatewaytest.CompileErr(cfg + "routes: []\n")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", cfg, err, want)
		}
	}
}

func TestDiscoveredInstancesKeepTheirHealthAcrossChanges(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	list := filepath.Join(dir, "orders.yaml")
	a, c := testutil.StartUpstream(t, "a"), testutil.StartUpstream(t, "c")
	dead := testutil.FreeAddr(t) // nothing listens: every try is refused
	writeSet(t, list, "[{addr: "+a.Addr+"}, {addr: "+dead+"}]")
	cfg := strings.Replace(discovered(dir, list), "    timeouts:", "    health: {eject_after: 2, interval: 1h}\n    timeouts:", 1)
	g := gatewaytest.Start(t, cfg, gatewaytest.Options{})
	state := func(addr string) string {
		for _, in := range upstream.ServicesOf(g.GW.Snapshot().Env())["orders"].Instances() {
			if in.Addr == addr {
				return in.Status().State
			}
		}
		return "absent"
	}
	if got := served(t, g, 20, nil); got["a"] != 20 {
		t.Fatalf("with one instance refusing (retried on a): %v", got)
	}
	if st := state(dead); st != "ejected" {
		t.Fatalf("the refusing instance is %s, want ejected", st)
	}
	// The set changes around it: it stays ejected, gets nothing.
	writeSet(t, list, "[{addr: "+a.Addr+"}, {addr: "+dead+"}, {addr: "+c.Addr+"}]")
	testutil.Eventually(t, 5*time.Second, "c served", func() bool { return served(t, g, 4, nil)["c"] > 0 })
	if st := state(dead); st != "ejected" {
		t.Fatalf("after a set change the refusing instance is %s, want still ejected", st)
	}
}

func TestARequestInFlightOnARemovedInstanceFinishes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	list := filepath.Join(dir, "orders.yaml")
	slow, b := testutil.StartUpstream(t, "slow"), testutil.StartUpstream(t, "b")
	slow.Delay.Store(int64(600 * time.Millisecond))
	writeSet(t, list, "[{addr: "+slow.Addr+"}]")
	g := gatewaytest.Start(t, discovered(dir, list), gatewaytest.Options{})
	done := make(chan map[string]int, 1)
	go func() { done <- served(t, g, 1, nil) }()
	testutil.Eventually(t, 5*time.Second, "the request reached the instance", func() bool { return slow.Requests.Load() == 1 })
	writeSet(t, list, "[{addr: "+b.Addr+"}]")
	testutil.Eventually(t, 5*time.Second, "b served", func() bool { return served(t, g, 1, nil)["b"] == 1 })
	if got := <-done; got["slow"] != 1 {
		t.Fatalf("the request in flight on the removed instance: %v", got)
	}
}

func TestACheckWatchesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	list := filepath.Join(dir, "orders.yaml")
	writeSet(t, list, "[{addr: \"127.0.0.1:1\"}]")
	f, err := config.Parse("t.yaml", []byte(discovered(dir, list)), nil)
	if err != nil {
		t.Fatal(err)
	}
	f.Defaults()
	comp := config.NewCompiler()
	comp.Offline = true
	defer comp.Close()
	start := time.Now()
	snap, err := comp.Compile(f, "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	comp.Discard(snap)
	if took := time.Since(start); took > time.Second {
		t.Fatalf("a check waited %v for a registry", took)
	}
	if n := len(upstream.ServicesOf(snap.Env())["orders"].Instances()); n != 0 {
		t.Fatalf("a check read the registry: %d instances", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "saved")); !os.IsNotExist(err) {
		t.Fatalf("a check saved a set: %v", err)
	}
}
