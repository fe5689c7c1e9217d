//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/tollgate/tollgate/internal/testutil"
)

// chromium finds a Chromium (or Chrome) binary; make test-deps installs
// the chromium package.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium binary: run make test-deps (apt-get install chromium)")
	return ""
}

// TestDashboardInBrowser starts the gateway with 1,000 routes and load on
// two of them, opens /dashboard in headless Chromium with the admin
// token, and checks that the requests per second and a route's row show,
// and change between two reads a few seconds apart. It saves a screenshot
// in the test's temporary directory (DASHBOARD_SCREENSHOT names another
// place to copy it to).
func TestDashboardInBrowser(t *testing.T) {
	browser := chromium(t)
	up := testutil.StartQuietUpstream(t, "ok")
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "watch: false\nservices:\n  api:\n    instances: [{addr: %q}]\n  orders:\n    instances: [{addr: %q}]\n", up.Addr, up.Addr)
	cfg.WriteString("routes:\n")
	cfg.WriteString("  - {name: orders, priority: 10, match: {prefix: /orders}, service: orders}\n")
	cfg.WriteString("  - {name: users, priority: 10, match: {prefix: /users}, service: api}\n")
	for i := range 998 {
		fmt.Fprintf(&cfg, "  - {name: api-%04d, match: {prefix: /v1/r%04d}, service: api}\n", i, i)
	}
	path := writeConfig(t, cfg.String())
	addr, admin := freePort(t), freePort(t)
	startProc(t, addr, admin, []string{"TOLLGATE_ADMIN_TOKEN=dash-token"}, "run", "-c", path)
	l1 := startLoad(addr, "/orders/1", 4)
	l2 := startLoad(addr, "/users/7", 2)
	missing := startLoad(addr, "/nowhere", 1)
	defer func() { l1.finish(); l2.finish(); missing.finish() }()

	b := openBrowser(t, browser, "dash-token")
	ctx, must, text, count := b.ctx, b.must, b.text, b.count
	must(chromedp.Do(ctx,
		chromedp.Navigate("http://"+admin+"/dashboard"),
		chromedp.WaitVisible(chromedp.CSS(`#routes-body tr[data-name="orders"]`)),
		chromedp.Sleep(1500*time.Millisecond), // two polls: rates need two reads
	))
	qps1, total1, rows1 := text("#qps"), text(`#routes-body tr[data-name="orders"] td.total`), text("#routecount")
	nRows := count("#routes-body tr")
	must(chromedp.Do(ctx, chromedp.Sleep(2500*time.Millisecond)))
	qps2, total2 := text("#qps"), text(`#routes-body tr[data-name="orders"] td.total`)
	// A read can fall between two renders of the table (the row not
	// there yet): read again until it is.
	for try := 0; total2 == "" && try < 20; try++ {
		must(chromedp.Do(ctx, chromedp.Sleep(100*time.Millisecond)))
		total2 = text(`#routes-body tr[data-name="orders"] td.total`)
	}
	num := func(s string) float64 {
		v, _ := strconv.ParseFloat(strings.ReplaceAll(strings.TrimSpace(s), ",", ""), 64)
		return v
	}
	t.Logf("first read: %s req/s, orders total %s, %s (%d rows shown); second read: %s req/s, orders total %s",
		qps1, total1, rows1, nRows, qps2, total2)
	if num(qps1) <= 0 || num(qps2) <= 0 {
		t.Fatalf("requests per second not shown: %q then %q", qps1, qps2)
	}
	if qps1 == qps2 && total1 == total2 {
		t.Fatal("nothing changed between two reads")
	}
	if num(total2) <= num(total1) {
		t.Fatalf("the orders row did not move: %q then %q", total1, total2)
	}
	// Standalone, the cluster is this node (both read from one render).
	same, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`["cqps", "qps", "cnodes"].map(id => document.getElementById(id).textContent)`))
	must(err)
	if same[0] != same[1] || same[2] != "1 node" || count("#cluster-nodes tr") != 1 {
		t.Fatalf("standalone cluster figures: %q req/s (%s), node %q", same[0], same[2], same[1])
	}
	// 1,000 routes and "(none)", the row of requests no route matched.
	if !strings.Contains(rows1, "1001 routes") || nRows != 300 {
		t.Fatalf("route table: %q with %d rows rendered", rows1, nRows)
	}

	// Filtering finds one route of the thousand.
	must(chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS("#filter"), "api-0042"), chromedp.Sleep(200*time.Millisecond)))
	if n := count("#routes-body tr"); n != 1 {
		t.Fatalf("filter api-0042: %d rows", n)
	}
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const f = document.getElementById("filter"); f.value = ""; return f.dispatchEvent(new Event("input")); })()`))
	must(err)
	must(chromedp.Do(ctx, chromedp.Sleep(1200*time.Millisecond)))
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	must(err)
	out := filepath.Join(t.TempDir(), "dashboard.png")
	if err := os.WriteFile(out, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	if dst := os.Getenv("DASHBOARD_SCREENSHOT"); dst != "" {
		_ = os.WriteFile(dst, shot, 0o644)
	}
	t.Logf("screenshot: %s (%d bytes)", out, len(shot))
}

// browser is a headless Chromium whose requests carry the admin token, as
// a browser does once the operator typed it into the Basic prompt.
type browser struct {
	ctx context.Context
	t   *testing.T
}

func openBrowser(t *testing.T, path, token string) *browser {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // tests run as root in CI
		chromedp.WindowSize(1440, 900),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancelT)
	b := &browser{ctx: ctx, t: t}
	_, err := chromedp.Call(ctx, network.Enable, network.EnableParams{})
	b.must(err)
	_, err = chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
		Headers: network.Headers{"Authorization": "Bearer " + token}})
	b.must(err)
	return b
}

func (b *browser) must(err error) {
	b.t.Helper()
	if err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	b.must(err)
	return v
}

func (b *browser) count(sel string) int {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+strconv.Quote(sel)+`).length`))
	b.must(err)
	return v
}

// TestDashboardClusterFigures: three gateways share a Redis, each under a
// steady load of its own (100, 200 and 300 requests a second). One node's
// dashboard shows the cluster's 600 requests a second and each node's
// share, in its JSON and on the page; when a node is killed (no goodbye),
// its share leaves the figure within seconds.
func TestDashboardClusterFigures(t *testing.T) {
	browserPath := chromium(t)
	rd := testutil.StartRedis(t)
	up := testutil.StartQuietUpstream(t, "ok")
	cfg := writeConfig(t, fmt.Sprintf("watch: false\nservices:\n  up: {instances: [{addr: %q}]}\nroutes:\n  - {name: all, match: {prefix: /}, service: up}\n", up.Addr))
	gws := startGateways(t, 3, cfg, rd.Addr)
	rates := []float64{100, 200, 300}
	var targets []target
	for i, g := range gws {
		targets = append(targets, target{node: i, addr: g.addr, uri: "/x", rate: rates[i]})
	}
	load := startPaced(targets)
	defer load.finish()

	type view struct {
		Totals      struct{ QPS float64 }
		ClusterLoad struct {
			QPS    float64
			Source string
			Nodes  []struct {
				Node string
				QPS  float64
				Self bool
			}
		} `json:"cluster_load"`
	}
	live := func() view {
		var v view
		if err := json.Unmarshal(adminGet(t, gws[0].admin, "/admin/live"), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	near := func(got, want float64) bool { return math.Abs(got-want) <= 0.15*want }
	var v view
	waitUntil(t, 10*time.Second, "the cluster's 600 req/s on node 0's dashboard", func() bool {
		time.Sleep(500 * time.Millisecond)
		v = live()
		c := v.ClusterLoad
		if len(c.Nodes) != 3 || !near(c.QPS, 600) || !c.Nodes[0].Self {
			return false
		}
		for _, n := range c.Nodes {
			if !near(n.QPS, 100) && !near(n.QPS, 200) && !near(n.QPS, 300) {
				return false
			}
		}
		return near(v.Totals.QPS, 100)
	})
	t.Logf("node 0's dashboard: cluster %.0f req/s, this node %.0f, nodes %+v", v.ClusterLoad.QPS, v.Totals.QPS, v.ClusterLoad.Nodes)
	if v.ClusterLoad.Source != "redis" {
		t.Fatalf("source %q", v.ClusterLoad.Source)
	}

	b := openBrowser(t, browserPath, limitsToken)
	b.must(chromedp.Do(b.ctx,
		chromedp.Navigate("http://"+gws[0].admin+"/dashboard"),
		chromedp.WaitVisible(chromedp.CSS(`#cluster-nodes tr:nth-child(3)`)),
	))
	num := func(s string) float64 {
		f, _ := strconv.ParseFloat(strings.ReplaceAll(strings.TrimSpace(s), ",", ""), 64)
		return f
	}
	// Node 0's own rate needs two polls, and a busy machine (the race
	// detector, other tests) can stretch one: read until the page shows
	// the figures.
	var cqps, qps, nodes string
	var rows int
	defer func() {
		if t.Failed() {
			t.Logf("page last read: cluster %q (%s), node %q, %d node rows", cqps, nodes, qps, rows)
		}
	}()
	waitUntil(t, 10*time.Second, "the page showing the cluster's figures", func() bool {
		time.Sleep(500 * time.Millisecond)
		cqps, qps, rows, nodes = b.text("#cqps"), b.text("#qps"), b.count("#cluster-nodes tr"), b.text("#cnodes")
		return near(num(cqps), 600) && near(num(qps), 100) && rows == 3 && nodes == "3 nodes"
	})
	t.Logf("page: cluster %s req/s (%s), this node %s req/s, %d node rows", cqps, nodes, qps, rows)

	// Node 2 dies without leaving: its report stops being counted after
	// three heartbeats, and the survivors delete it with its membership.
	_ = gws[2].cmd.Process.Signal(syscall.SIGKILL)
	took := waitUntil(t, 10*time.Second, "the killed node's share gone", func() bool {
		time.Sleep(500 * time.Millisecond)
		v = live()
		return len(v.ClusterLoad.Nodes) == 2 && near(v.ClusterLoad.QPS, 300)
	})
	waitUntil(t, 5*time.Second, "the page showing two nodes", func() bool {
		time.Sleep(200 * time.Millisecond)
		return b.count("#cluster-nodes tr") == 2 && near(num(b.text("#cqps")), 300)
	})
	t.Logf("after the kill (seen in %v): cluster %.0f req/s, nodes %+v", took.Round(100*time.Millisecond), v.ClusterLoad.QPS, v.ClusterLoad.Nodes)
}
