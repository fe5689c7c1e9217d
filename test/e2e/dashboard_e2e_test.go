//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser),
		chromedp.NoSandbox, // tests run as root in CI
		chromedp.WindowSize(1440, 900),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	defer cancelT()

	// The page and its polls carry the token, as a browser does once the
	// operator typed it into the Basic prompt.
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("browser: %v", err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		must(err)
		return v
	}
	count := func(sel string) int {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+strconv.Quote(sel)+`).length`))
		must(err)
		return v
	}
	_, err := chromedp.Call(ctx, network.Enable, network.EnableParams{})
	must(err)
	_, err = chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
		Headers: network.Headers{"Authorization": "Bearer dash-token"}})
	must(err)
	must(chromedp.Do(ctx,
		chromedp.Navigate("http://"+admin+"/dashboard"),
		chromedp.WaitVisible(chromedp.CSS(`#routes-body tr[data-name="orders"]`)),
		chromedp.Sleep(1500*time.Millisecond), // two polls: rates need two reads
	))
	qps1, total1, rows1 := text("#qps"), text(`#routes-body tr[data-name="orders"] td.total`), text("#routecount")
	nRows := count("#routes-body tr")
	must(chromedp.Do(ctx, chromedp.Sleep(2500*time.Millisecond)))
	qps2, total2 := text("#qps"), text(`#routes-body tr[data-name="orders"] td.total`)
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
