//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/sign"
	"github.com/valyala/fasthttp"
)

const (
	shopApp    = "shop-app"
	shopSecret = "shop-secret-0123456789abcdef"
)

// shop is the backend whose releases a replay compares. Release 2 prices
// items at 12 instead of 10 and answers payments 202 instead of 200;
// everything else is the same. Every answer carries the time, which a
// replay ignores, and orders echo the card number and set a session cookie.
func shop(release int) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		ts := strconv.FormatInt(time.Now().UnixNano(), 10)
		switch string(ctx.Path()) {
		case "/api/items":
			price := map[int]string{1: "10", 2: "12"}[release]
			id := string(ctx.QueryArgs().Peek("id"))
			ctx.SetBodyString(`{"id":"` + id + `","name":"item-` + id + `","price":` + price + `,"ts":` + ts + `}`)
		case "/api/pay":
			ctx.SetStatusCode(map[int]int{1: 200, 2: 202}[release])
			f := ctx.PostArgs()
			ctx.SetBodyString(`{"paid":"` + string(f.Peek("amount")) + `","merchant":"` + string(f.Peek("merchant")) + `","ts":` + ts + `}`)
		case "/api/orders":
			var o struct {
				SKU  string `json:"sku"`
				Qty  int    `json:"qty"`
				Card struct {
					Number string `json:"number"`
				} `json:"card"`
			}
			if json.Unmarshal(ctx.PostBody(), &o) != nil {
				ctx.SetStatusCode(400)
				return
			}
			ctx.SetStatusCode(201)
			ctx.Response.Header.Set("Set-Cookie", "sid=sess-"+o.SKU+"-"+ts+"; HttpOnly")
			ctx.SetBodyString(fmt.Sprintf(`{"order":"o-%s","qty":%d,"card":{"number":%q},"ts":%s}`, o.SKU, o.Qty, o.Card.Number, ts))
		default:
			ctx.SetStatusCode(404)
		}
	}
}

const shopRoutes = `
consumers:
  - {app_key: shop-app, secret: "${SHOP_SECRET}"}
services:
  shop: {instances: [{addr: "%s"}]}
routes:
  - name: items
    match: {path: /api/items, methods: [GET]}%s
    service: shop
  - name: pay
    match: {path: /api/pay, methods: [POST]}
    auth: signature%s
    service: shop
  - name: orders
    match: {path: /api/orders, methods: [POST]}%s
    service: shop
`

// recordingConfig is the shop's configuration with every route recorded.
func recordingConfig(up, dir string) string {
	return fmt.Sprintf("admin: {token: adm1n}\nrecording: {dir: %q, max_file_bytes: 262144, max_files: 100, queue: 4096}\n"+shopRoutes, dir, up,
		"\n    record: {sample: 1, mask: [query.card_no]}",
		"\n    record: {sample: 1, mask: [form.card_no]}",
		"\n    record: {sample: 1, mask: [json.card.number]}")
}

// secretsSent collects every secret the traffic sent or got, for the grep.
type secretsSent struct {
	mu   sync.Mutex
	list []string
}

func (s *secretsSent) add(v ...string) {
	s.mu.Lock()
	s.list = append(s.list, v...)
	s.mu.Unlock()
}

// shopRequest is the i-th request of the mixed traffic: a GET with a query
// (and a bearer token, a session cookie, a card number), a signed form
// POST, or a JSON POST with a card number.
func shopRequest(t *testing.T, addr string, i int, s *secretsSent) (*fasthttp.Request, int) {
	card := fmt.Sprintf("4%015d", 100000000+i)
	req := new(fasthttp.Request)
	req.Header.SetHost("shop.test")
	switch i % 3 {
	case 0:
		tok, sess := fmt.Sprintf("tok-%08d-secret", i), fmt.Sprintf("sess-%08d-secret", i)
		req.SetRequestURI(fmt.Sprintf("http://%s/api/items?id=%d&card_no=%s", addr, i, card))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Cookie", "session="+sess+"; theme=dark")
		s.add(card, tok, sess)
		return req, 200
	case 1:
		form := fmt.Sprintf("amount=%d&merchant=m%d&card_no=%s", i, i%7, card)
		u, _ := url.Parse(fmt.Sprintf("http://%s/api/pay?cmd=pay", addr))
		h, err := sign.Headers(shopApp, shopSecret, "POST", u, form, time.Now(), "")
		if err != nil {
			t.Fatal(err)
		}
		req.SetRequestURI(u.String())
		req.Header.SetMethod("POST")
		req.Header.SetContentType("application/x-www-form-urlencoded")
		req.SetBodyString(form)
		for k, v := range h {
			req.Header.Set(k, v[0])
		}
		s.add(card, h.Get(sign.HeaderSign))
		return req, 200
	}
	req.SetRequestURI(fmt.Sprintf("http://%s/api/orders", addr))
	req.Header.SetMethod("POST")
	req.Header.SetContentType("application/json")
	req.SetBodyString(fmt.Sprintf(`{"sku":"s%d","qty":%d,"card":{"number":"%s","holder":"H"}}`, i, i%5+1, card))
	s.add(card)
	return req, 201
}

// stop sends SIGTERM and waits for a clean exit: the recording is flushed.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			t.Fatalf("exit: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the gateway did not stop")
	}
}

func adminPost(t *testing.T, admin, path, body string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+admin+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer adm1n")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestRecordReplayEndToEnd records 1,000 mixed requests against release 1
// and replays them against a gateway in front of release 2: the report
// names exactly the two changes, signed requests pass the target's
// signature and nonce checks (twice), and no recorded line holds a secret.
func TestRecordReplayEndToEnd(t *testing.T) {
	v1, _ := testutil.StartHandler(t, shop(1))
	dir := filepath.Join(t.TempDir(), "recordings")
	addr, admin := freePort(t), freePort(t)
	env := []string{"SHOP_SECRET=" + shopSecret, "TOLLGATE_DRAIN_DELAY=0s"}
	p := startProc(t, addr, admin, env, "run", "-c", writeConfig(t, recordingConfig(v1, dir)))

	const n = 1000
	var secrets secretsSent
	secrets.add(shopSecret)
	counts := map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var resp fasthttp.Response
			for i := range next {
				req, want := shopRequest(t, addr, i, &secrets)
				if err := fasthttp.DoTimeout(req, &resp, 5*time.Second); err != nil || resp.StatusCode() != want {
					t.Errorf("request %d: %v %d %s", i, err, resp.StatusCode(), resp.Body())
					continue
				}
				if c := resp.Header.PeekCookie("sid"); c != nil {
					secrets.add(string(c))
				}
				mu.Lock()
				counts[i%3]++
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if t.Failed() {
		return
	}

	// Switched off through the admin API, a route records nothing.
	if st := adminPost(t, admin, "/admin/recording", `{"route":"items","on":false,"reason":"test"}`); st != 200 {
		t.Fatalf("switching recording off: %d", st)
	}
	for i := range 10 {
		req, _ := shopRequest(t, addr, 3*i, &secrets)
		var resp fasthttp.Response
		if err := fasthttp.DoTimeout(req, &resp, 5*time.Second); err != nil || resp.StatusCode() != 200 {
			t.Fatalf("with recording off: %v %d", err, resp.StatusCode())
		}
	}
	p.stop(t)

	files, _ := filepath.Glob(filepath.Join(dir, "record-*.jsonl"))
	if len(files) < 2 {
		t.Fatalf("%d recording files: the 256 KiB size limit should have started several", len(files))
	}
	lines := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(b)) > 262144 {
			t.Errorf("%s is %d bytes, over max_file_bytes", f, len(b))
		}
		lines += bytes.Count(b, []byte("\n"))
		for _, s := range secrets.list {
			if bytes.Contains(b, []byte(s)) {
				t.Fatalf("%s holds a secret that was sent: %q", f, s)
			}
		}
	}
	if lines != n {
		t.Fatalf("%d records, want %d (and none while switched off)", lines, n)
	}
	t.Logf("recorded %d requests in %d files; none of %d secrets found in them", lines, len(files), len(secrets.list))

	// Release 2 behind a gateway that checks signatures and nonces.
	v2, _ := testutil.StartHandler(t, shop(2))
	target := freePort(t)
	startProc(t, target, "off", env, "run", "-c", writeConfig(t, fmt.Sprintf(shopRoutes, v2, "", "", "")))
	diffs := filepath.Join(t.TempDir(), "diffs.jsonl")
	args := append([]string{"replay"}, files...)
	args = append(args, "--target", "http://"+target, "--rate", "max", "--concurrency", "8",
		"--app-key", shopApp, "--secret-env", "SHOP_SECRET", "--ignore", "json.ts", "--compare-header", "Content-Type", "--out", diffs)
	out, code := runBinary(t, env, args...)
	t.Logf("replay:\n%s", out)
	items, pays, orders := counts[0], counts[1], counts[2]
	if code != 1 {
		t.Fatalf("exit %d, want 1 (differences beyond --max-diff 0)", code)
	}
	for _, want := range []string{
		fmt.Sprintf("replayed %d requests", n),
		fmt.Sprintf("matched     %7d", orders),
		fmt.Sprintf("differing   %7d   status %d, header 0, body %d", items+pays, pays, items),
		"errors            0",
		fmt.Sprintf("credentials %7d re-signed", pays),
		fmt.Sprintf("%7d  body    json.price", items),
		fmt.Sprintf("%7d  status  200 → 202", pays),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if m := regexp.MustCompile(`(?m)^ +\d+  \w+ `).FindAllString(out, -1); len(m) != 2 {
		t.Errorf("the report lists %d places, want exactly 2: %q", len(m), m)
	}
	b, err := os.ReadFile(diffs)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r struct {
			Route       string
			Kinds       []string
			Differences []struct{ Kind, Where, Want, Got string }
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		d := r.Differences
		if len(d) != 1 || len(r.Kinds) != 1 {
			t.Fatalf("%s: %s", r.Route, line)
		}
		got[r.Route+" "+r.Kinds[0]+" "+d[0].Where+" "+d[0].Want+" "+d[0].Got]++
	}
	want := map[string]int{"items body json.price 10 12": items, "pay status  200 202": pays}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("differences file: %v, want %v", got, want)
	}

	// Again, with room for every difference: fresh nonces pass again.
	out, code = runBinary(t, env, append(args, "--max-diff", "1000")...)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("status %d, header 0, body %d", pays, items)) {
		t.Fatalf("second replay: exit %d\n%s", code, out)
	}

	// The orders route's answers become its mock block, which a
	// configuration accepts.
	mock, code := runBinary(t, nil, append(append([]string{"replay", "--to-mock"}, files...), "--route", "orders", "--max-responses", "3")...)
	// A card number is a quoted 16-digit string; the answers' unquoted
	// nanosecond timestamps may hold any run of digits.
	unmaskedCard := regexp.MustCompile(`"4\d{15}"`)
	if code != 0 || !strings.Contains(mock, "pick: round_robin") || strings.Count(mock, "- status: 201") != 3 || unmaskedCard.MatchString(mock) {
		t.Fatalf("to-mock: exit %d\n%s", code, mock)
	}
	indented := strings.ReplaceAll(strings.TrimSpace(mock), "\n", "\n    ")
	cfg := writeConfig(t, "routes:\n  - name: orders\n    match: {path: /api/orders}\n    "+indented+"\n")
	if out, code := runBinary(t, nil, "validate", cfg); code != 0 {
		t.Fatalf("the mock block does not validate: %s", out)
	}
}

// runBinary runs the tollgate binary and returns its combined output and
// exit code.
func runBinary(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		}
		t.Fatal(err)
	}
	return string(out), 0
}

// TestMirrorEndToEnd: a route mirrors half its requests to a shadow
// release; the shadow gets about half, clients see only the primary, and
// when the shadow dies the clients notice nothing while /metrics counts
// the failed copies.
func TestMirrorEndToEnd(t *testing.T) {
	primary := testutil.StartUpstream(t, "primary")
	shadow := testutil.StartUpstream(t, "shadow")
	cfg := fmt.Sprintf(`
services:
  main: {instances: [{addr: %q}]}
  shadow: {instances: [{addr: %q}], timeouts: {connect: 200ms, read: 1s, total: 1s}}
routes:
  - name: api
    match: {prefix: /}
    mirror: {service: shadow, sample: 0.5, compare: true}
    service: main
`, primary.Addr, shadow.Addr)
	addr, admin := freePort(t), freePort(t)
	startProc(t, addr, admin, nil, "run", "-c", writeConfig(t, cfg))
	const n = 600
	for i := range n {
		if st, body := testutil.Get(t, fmt.Sprintf("http://%s/x?i=%d", addr, i)); st != 200 || body != "primary" {
			t.Fatalf("request %d: %d %q", i, st, body)
		}
	}
	var sent float64
	testutil.Eventually(t, 5*time.Second, "every mirrored request compared", func() bool {
		sent = sumOf(scrape(t, admin), "tollgate_mirror_requests_total", map[string]string{"route": "api", "result": "ok"})
		return sent == float64(shadow.Requests.Load()) && sent > 0
	})
	if got := shadow.Requests.Load(); got < 230 || got > 370 {
		t.Fatalf("sample 0.5 of %d: the shadow got %d", n, got)
	}
	fams := scrape(t, admin)
	if d := sumOf(fams, "tollgate_mirror_differences_total", map[string]string{"route": "api", "kind": "body"}); d != sent {
		t.Fatalf("%v body differences counted of %v compared answers that all differ", d, sent)
	}

	shadow.Close()
	for i := range 200 {
		start := time.Now()
		if st, body := testutil.Get(t, fmt.Sprintf("http://%s/y?i=%d", addr, i)); st != 200 || body != "primary" || time.Since(start) > time.Second {
			t.Fatalf("with the shadow dead, request %d: %d %q after %v", i, st, body, time.Since(start))
		}
	}
	testutil.Eventually(t, 5*time.Second, "failed mirror requests counted", func() bool {
		return sumOf(scrape(t, admin), "tollgate_mirror_requests_total", map[string]string{"route": "api", "result": "failed"}) > 50
	})
}
