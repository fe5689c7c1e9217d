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
	// 1,000 routes and "(none)", the row of requests no route matched
	// (not counted as a route).
	if rows1 != "1000 routes + 1 unrouted row" || nRows != 300 {
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

// TestDashboardWithURLCredentials opens the dashboard as the docs say an
// operator may, with the token in the URL (http://admin:TOKEN@host/…),
// in a 1280-pixel-wide window. The page is filled from its first answer,
// before any poll (its polls are blocked for that first look); the polls
// then work although the page's URL carries credentials; nothing spills
// out of its column; and the route counts in the header and the table
// agree (the table's "no route matched" row is not a route).
func TestDashboardWithURLCredentials(t *testing.T) {
	browserPath := chromium(t)
	up := testutil.StartQuietUpstream(t, "ok")
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "watch: false\nservices:\n  api:\n    instances: [{addr: %q}]\nroutes:\n", up.Addr)
	for i := range 8 {
		fmt.Fprintf(&cfg, "  - {name: route-with-a-long-name-%d, match: {prefix: /r%d}, service: api, breaker: {window: 10s, failure_rate: 0.5, min_requests: 100, open_for: 30s}}\n", i, i)
	}
	path := writeConfig(t, cfg.String())
	addr, admin := freePort(t), freePort(t)
	startProc(t, addr, admin, []string{"TOLLGATE_ADMIN_TOKEN=" + limitsToken}, "run", "-c", path)
	load := startLoad(addr, "/r1/x", 2)
	missing := startLoad(addr, "/nowhere", 1)
	defer func() { load.finish(); missing.finish() }()
	time.Sleep(500 * time.Millisecond) // the unmatched row exists once a request missed

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browserPath),
		chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	defer cancelT()
	b := &browser{ctx: ctx, t: t}
	_, err := chromedp.Call(ctx, network.Enable, network.EnableParams{})
	b.must(err)
	_, err = chromedp.Call(ctx, network.SetBlockedURLs, network.SetBlockedURLsParams{
		URLPatterns: []*network.BlockPattern{{URLPattern: "*://*:*/admin/live", Block: true}}})
	b.must(err)

	b.must(chromedp.Do(ctx,
		chromedp.Navigate("http://admin:"+limitsToken+"@"+admin+"/dashboard"),
		chromedp.WaitReady("body"),
	))
	if node := b.text("#node"); node == "" || node == "–" {
		t.Fatalf("node not shown from the page's first answer: %q", node)
	}
	if n := b.count("#routes-body tr"); n < 9 {
		t.Fatalf("route table from the page's first answer: %d rows", n)
	}
	if v := b.text("#version"); !strings.Contains(v, "8 routes") {
		t.Fatalf("header: %q", v)
	}
	if c := b.text("#routecount"); !strings.HasPrefix(c, "8 routes") {
		t.Fatalf("table count %q, header says 8 routes", c)
	}

	// Polls through the URL with credentials.
	_, err = chromedp.Call(ctx, network.SetBlockedURLs, network.SetBlockedURLsParams{})
	b.must(err)
	var qps string
	waitUntil(t, 15*time.Second, "the page polling with credentials in its URL", func() bool {
		time.Sleep(300 * time.Millisecond)
		qps = b.text("#qps")
		v, _ := strconv.ParseFloat(strings.ReplaceAll(qps, ",", ""), 64)
		return v > 0
	})
	if stale, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("stale").classList.contains("on")`)); err != nil || stale {
		t.Fatalf("the page says it has no answer (err %v)", err)
	}

	// Nothing wider than its box at 1280 pixels, nor at two wider sizes.
	for _, width := range []int64{1280, 1440, 1920} {
		b.must(chromedp.Do(ctx, chromedp.EmulateViewport(width, 900)))
		assertNoOverflow(t, b, width)
	}
	t.Logf("filled before its first poll; polling shows %s req/s; no overflow at 1280, 1440 and 1920 px", qps)
}

// assertNoOverflow fails when the page, or a section of it, is wider than
// its box.
func assertNoOverflow(t *testing.T, b *browser, width int64) {
	t.Helper()
	over, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](`(() => {
		const out = [];
		if (document.documentElement.scrollWidth > window.innerWidth) out.push("page " + document.documentElement.scrollWidth + " > " + window.innerWidth);
		document.querySelectorAll("section").forEach(s => {
			if (s.scrollWidth > s.clientWidth + 1) out.push((s.querySelector("h2") || s).textContent.trim().slice(0, 30) + ": " + s.scrollWidth + " > " + s.clientWidth + " " + [...(s.querySelector("tbody tr") || s).children].map(c => c.textContent + "=" + c.offsetWidth).join(" "));
		});
		return out;
	})()`))
	b.must(err)
	if len(over) > 0 {
		t.Fatalf("overflow at %d px: %v", width, over)
	}
}
