package limiter

import (
	"bufio"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cluster"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
	"gopkg.in/yaml.v3"
)

// fakeClock is an injected clock.
type fakeClock struct{ ns atomic.Int64 }

func newClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(t0)
	return c
}
func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Add(d time.Duration)     { c.ns.Add(int64(d)) }
func (c *fakeClock) Set(ns int64)            { c.ns.Store(ns) }
func (c *fakeClock) Since0() time.Duration   { return time.Duration(c.ns.Load() - t0) }
func (c *fakeClock) sleepTo(d time.Duration) { c.Set(t0 + int64(d)) }

// testEnv is a build environment with an injected clock.
type testEnv struct {
	clock *fakeClock
	state *pipeline.State
	// shared holds the shared objects every build of the test sees.
	shared *pipeline.Env
}

func newEnv() *testEnv {
	e := &testEnv{clock: newClock(), state: pipeline.NewState(time.Minute), shared: &pipeline.Env{}}
	quotasKey.Set(e.shared, &Quotas{
		Consumers: map[string]pipeline.Quota{"demo-app": {Tier: "basic", QPS: 100}, "big": {Tier: "custom", QPS: 1000},
			"huge": {Tier: "custom", QPS: 1_000_000_000}},
		Tiers: map[string]int{"free": 10, "basic": 100, "enterprise": 1000},
	})
	return e
}

// env returns a build environment with the test's shared objects.
func (e *testEnv) env(now func() time.Time, st *pipeline.StateBuild) *pipeline.Env {
	env := *e.shared
	env.Now, env.State = now, st
	return &env
}

// build compiles a limits list written in YAML for route.
func (e *testEnv) build(t testing.TB, route, text string) *Filter {
	t.Helper()
	var cfgs []Config
	if err := yaml.Unmarshal([]byte(text), &cfgs); err != nil {
		t.Fatal(err)
	}
	st := e.state.Begin()
	f, err := Build(&pipeline.Build{Env: e.env(e.clock.Now, st),
		Route: pipeline.RouteInfo{Name: route, Forwards: true}}, cfgs)
	if err != nil {
		t.Fatal(err)
	}
	st.Commit()
	return f
}

func buildErr(text string) error {
	var cfgs []Config
	if err := yaml.Unmarshal([]byte(text), &cfgs); err != nil {
		return err
	}
	e := newEnv()
	_, err := Build(&pipeline.Build{Env: e.env(e.clock.Now, e.state.Begin()),
		Route: pipeline.RouteInfo{Name: "r"}}, cfgs)
	return err
}

// req describes a test request.
type req struct {
	ip       string
	consumer string
	user     string
	raw      string // request text; default GET /
}

func (r req) ctx(t testing.TB) *pipeline.Ctx {
	t.Helper()
	raw := r.raw
	if raw == "" {
		raw = "GET / HTTP/1.1\r\nHost: h\r\n\r\n"
	}
	q := new(fasthttp.Request)
	if err := q.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	c := pipeline.AcquireParsed(q, new(fasthttp.Response))
	if r.ip == "" {
		r.ip = "192.0.2.1"
	}
	c.ClientIP = netip.MustParseAddr(r.ip)
	c.Consumer, c.UserID = r.consumer, r.user
	return c
}

// do runs one request through f and returns its status (200 when admitted).
func do(t testing.TB, f *Filter, r req) (int, *pipeline.Ctx) {
	t.Helper()
	c := r.ctx(t)
	if f.Handle(c) == pipeline.Continue {
		c.Resp.SetStatusCode(200)
		f.HandleResponse(c)
		return 200, c
	}
	f.HandleResponse(c)
	return c.Resp.StatusCode(), c
}

func count(t testing.TB, f *Filter, r req, n int) (ok int, last *pipeline.Ctx) {
	t.Helper()
	for range n {
		st, c := do(t, f, r)
		if st == 200 {
			ok++
		}
		if last != nil {
			pipeline.Release(last)
		}
		last = c
	}
	return ok, last
}

func TestIPLimitRefusesWith911AndHeaders(t *testing.T) {
	e := newEnv()
	f := e.build(t, "order-create", "[{by: ip, rate: 10, per: 1s}]")
	ok, c := count(t, f, req{ip: "198.51.100.7"}, 20)
	if ok != 15 {
		t.Fatalf("admitted %d, want the burst of 15", ok)
	}
	h := &c.Resp.Header
	if c.Resp.StatusCode() != 911 || string(h.Peek("Retry-After")) != "1" || string(h.Peek("X-RateLimit-Limit")) != "10" ||
		string(h.Peek("X-RateLimit-Remaining")) != "0" || string(h.Peek("X-RateLimit-Reset")) != "2" {
		t.Fatalf("refusal: %d headers:\n%s", c.Resp.StatusCode(), h.String())
	}
	body := string(c.Resp.Body())
	if !strings.Contains(body, `"code":911`) || !strings.Contains(body, `order-create.ip`) {
		t.Fatalf("body %s", body)
	}
	if c.Decision != `rate limit "order-create.ip" exceeded` {
		t.Fatalf("decision %q", c.Decision)
	}
	// Another client has its own counter.
	if ok, _ := count(t, f, req{ip: "198.51.100.8"}, 5); ok != 5 {
		t.Fatalf("another ip: %d", ok)
	}
}

func TestMissingValueSharesOneCounter(t *testing.T) {
	e := newEnv()
	f := e.build(t, "r", "[{by: header.X-Session, rate: 2, per: 1s, burst: 2}]")
	with := func(s string) req {
		return req{raw: "GET / HTTP/1.1\r\nHost: h\r\nX-Session: " + s + "\r\n\r\n"}
	}
	if ok, _ := count(t, f, with("a"), 5); ok != 2 {
		t.Fatalf("session a: %d", ok)
	}
	if ok, _ := count(t, f, with("b"), 5); ok != 2 {
		t.Fatalf("session b: %d", ok)
	}
	// Requests without the header are not let through unlimited: they
	// share one counter, whoever sends them.
	if ok, _ := count(t, f, req{ip: "192.0.2.1"}, 3); ok != 2 {
		t.Fatalf("first without a session: %d", ok)
	}
	if ok, _ := count(t, f, req{ip: "192.0.2.2"}, 3); ok != 0 {
		t.Fatalf("second without a session: %d", ok)
	}
	if n := f.rules[0].counts.missing.Load(); n != 6 {
		t.Fatalf("missing counted %d", n)
	}
}

func TestRejectForBlocksAfterTripping(t *testing.T) {
	e := newEnv()
	// Order creation: 5 per minute per user, then blocked 10 minutes.
	f := e.build(t, "order-create", "[{by: user, rate: 5, per: 1m, burst: 5, reject_for: 10m}]")
	u := req{user: "u-1"}
	if ok, _ := count(t, f, u, 5); ok != 5 {
		t.Fatalf("first five: %d", ok)
	}
	st, c := do(t, f, u)
	if st != 911 || string(c.Resp.Header.Peek("Retry-After")) != "600" {
		t.Fatalf("6th: %d Retry-After %s", st, c.Resp.Header.Peek("Retry-After"))
	}
	e.clock.Add(5 * time.Minute) // the bucket has refilled, the block holds
	if st, c := do(t, f, u); st != 911 || string(c.Resp.Header.Peek("Retry-After")) != "300" {
		t.Fatalf("5 minutes in: %d %s", st, c.Resp.Header.Peek("Retry-After"))
	}
	e.clock.Add(5*time.Minute + time.Millisecond)
	if st, _ := do(t, f, u); st != 200 {
		t.Fatalf("after the block: %d", st)
	}
	if b := f.rules[0].counts.blocked.Load(); b != 1 {
		t.Fatalf("blocked counted %d", b)
	}
	// Another user is not affected.
	if st, _ := do(t, f, req{user: "u-2"}); st != 200 {
		t.Fatalf("u-2: %d", st)
	}
}

func TestConsumerIsTheAuthenticatedOneNotAHeader(t *testing.T) {
	e := newEnv()
	f := e.build(t, "r", "[{by: consumer, rate: 1, burst: 1}]")
	spoof := func(h string) req {
		return req{consumer: "demo-app", raw: "GET / HTTP/1.1\r\nHost: h\r\nX-Consumer: " + h + "\r\nX-App-Key: " + h + "\r\n\r\n"}
	}
	if ok, _ := count(t, f, spoof("a"), 1); ok != 1 {
		t.Fatal("first")
	}
	if ok, _ := count(t, f, spoof("b"), 3); ok != 0 {
		t.Fatal("a client header changed the consumer's counter")
	}
}

func TestNestedTierQuotas(t *testing.T) {
	e := newEnv()
	api := e.build(t, "order-create", "[{by: consumer, scope: cluster}, {by: consumer, scope: cluster, share: 0.5}]")
	other := e.build(t, "stock", "[{by: consumer, scope: cluster}]")
	c := req{consumer: "demo-app"} // basic: 100/s, burst 150
	okAPI, last := count(t, api, c, 200)
	if okAPI != 75 { // the share's burst: 1.5 × 50
		t.Fatalf("order-create admitted %d, want 75", okAPI)
	}
	if last.Resp.StatusCode() != 919 || !strings.Contains(string(last.Resp.Body()), "API share of the tier quota exceeded: order-create.share (tier basic)") ||
		string(last.Resp.Header.Peek("X-RateLimit-Limit")) != "50" {
		t.Fatalf("share refusal: %d %s %s", last.Resp.StatusCode(), last.Resp.Body(), last.Resp.Header.Peek("X-RateLimit-Limit"))
	}
	// The share's refusals took nothing from the tier: the rest of the
	// tier's burst (150 - 75) is there for the other API.
	okOther, last := count(t, other, c, 200)
	if okOther != 75 {
		t.Fatalf("stock admitted %d, want 75", okOther)
	}
	if last.Resp.StatusCode() != 919 || !strings.Contains(string(last.Resp.Body()), "tier quota exceeded: stock.tier (tier basic)") {
		t.Fatalf("tier refusal: %s", last.Resp.Body())
	}
	// Now the tier is empty: order-create is refused by the tier.
	_, last = count(t, api, c, 1)
	if !strings.Contains(string(last.Resp.Body()), "tier quota exceeded: order-create.tier") {
		t.Fatalf("order-create after the tier ran out: %s", last.Resp.Body())
	}
	// Sustained: over 10 s at 400/s offered on each API (arrivals at
	// random), the tier's 100/s is shared first come first served and
	// order-create never takes more than its 50/s.
	okAPI, okOther = 0, 0
	rng := rand.New(rand.NewPCG(1, 1))
	start := e.clock.ns.Load()
	for i := range 8000 {
		e.clock.Set(start + int64(i)*int64(1250*time.Microsecond) + rng.Int64N(int64(time.Millisecond)))
		f, n := other, &okOther
		if rng.IntN(2) == 0 {
			f, n = api, &okAPI
		}
		if st, cx := do(t, f, c); st == 200 {
			*n++
			pipeline.Release(cx)
		}
	}
	if okAPI < 400 || okAPI > 505 || okAPI+okOther < 995 || okAPI+okOther > 1005 {
		t.Fatalf("10 s: order-create %d (want <= 500), stock %d (tier total 1000)", okAPI, okOther)
	}
	t.Logf("10 s at 400/s each: order-create %d, stock %d", okAPI, okOther)
	// With nothing sent elsewhere, the API gets exactly its share.
	okAPI = 0
	start = e.clock.ns.Load() + int64(10*time.Second)
	for i := range 4000 {
		e.clock.Set(start + int64(i)*int64(2500*time.Microsecond))
		if st, cx := do(t, api, c); st == 200 {
			okAPI++
			pipeline.Release(cx)
		}
	}
	if okAPI < 570 || okAPI > 576 { // 75 burst + 50/s × 10 s
		t.Fatalf("order-create alone for 10 s: %d, want 575", okAPI)
	}
	// A consumer without a tier (a JWT caller) gets the free tier.
	if ok, _ := count(t, other, req{consumer: "jwt:someone"}, 50); ok != 15 {
		t.Fatalf("free tier: %d", ok)
	}
	// A custom quota.
	if ok, _ := count(t, other, req{consumer: "big"}, 2000); ok != 1500 {
		t.Fatalf("custom 1000/s: %d", ok)
	}
}

func TestLocalLimitSplitByNodes(t *testing.T) {
	e := newEnv()
	nodes := &varNodes{}
	nodes.n.Store(2)
	cluster.NodesEnvKey.Set(e.shared, nodes)
	f := e.build(t, "r", "[{rate: 100, per: 1s, burst: 100}]")
	if ok, _ := count(t, f, req{}, 200); ok != 50 {
		t.Fatalf("one node of 2: burst %d, want 50", ok)
	}
	n := 0
	for range 1000 {
		e.clock.Add(10 * time.Millisecond)
		if ok, c := count(t, f, req{}, 1); ok == 1 {
			n++
			pipeline.Release(c)
		}
	}
	if n < 495 || n > 505 {
		t.Fatalf("10 s at 2 nodes: %d, want 500", n)
	}
	nodes.n.Store(1) // a node left: the share grows at once
	e.clock.Add(10 * time.Second)
	n = 0
	for range 1000 {
		e.clock.Add(5 * time.Millisecond)
		if ok, c := count(t, f, req{}, 1); ok == 1 {
			n++
			pipeline.Release(c)
		}
	}
	if n < 595 || n > 605 { // 100 burst + 5 s × 100
		t.Fatalf("5 s alone: %d, want 600", n)
	}
}

type varNodes struct{ n atomic.Int64 }

func (v *varNodes) LiveNodes() int { return int(v.n.Load()) }

func TestStateSurvivesReloadOfUnchangedRule(t *testing.T) {
	e := newEnv()
	f := e.build(t, "r", "[{by: ip, rate: 10, burst: 10}]")
	if ok, _ := count(t, f, req{}, 10); ok != 10 {
		t.Fatal("fill")
	}
	f = e.build(t, "r", "[{by: ip, rate: 10, burst: 10, headers: true}]") // presentation only
	if ok, _ := count(t, f, req{}, 1); ok != 0 {
		t.Fatal("a reload that kept the rule reset its counter")
	}
	f = e.build(t, "r", "[{by: ip, rate: 20, burst: 10}]") // a new rule
	if ok, _ := count(t, f, req{}, 10); ok != 10 {
		t.Fatal("a changed rule kept the old counter")
	}
}

func TestStatusOverrideAndChallenge(t *testing.T) {
	e := newEnv()
	statusKey.Set(e.shared, Statuses{LocalLimit: 429, ClusterLimit: 503})
	f := e.build(t, "r", `
- {by: ip, rate: 1, burst: 1}
- {by: user, rate: 1, burst: 1, status: 420}
- {by: header.X-Device, rate: 1, burst: 1, on_reject: {status: 302, body: "solve the captcha", content_type: text/plain, headers: {Location: "/captcha"}}}`)
	if st, _ := do(t, f, req{ip: "192.0.2.9", user: "a"}); st != 200 {
		t.Fatal(st)
	}
	if st, _ := do(t, f, req{ip: "192.0.2.9", user: "b"}); st != 429 {
		t.Fatalf("configured local status: %d", st)
	}
	if st, _ := do(t, f, req{ip: "192.0.2.10", user: "a"}); st != 420 {
		t.Fatalf("rule status: %d", st)
	}
	dev := "GET / HTTP/1.1\r\nHost: h\r\nX-Device: d1\r\n\r\n"
	do(t, f, req{ip: "192.0.2.11", user: "c", raw: dev})
	st, c := do(t, f, req{ip: "192.0.2.12", user: "d", raw: dev})
	if st != 302 || string(c.Resp.Header.Peek("Location")) != "/captcha" || string(c.Resp.Body()) != "solve the captcha" ||
		c.Resp.Header.Peek("Retry-After") == nil || c.Decision != `rate limit "r.header.X-Device" exceeded (challenge)` {
		t.Fatalf("challenge: %d %q %s\n%s", st, c.Decision, c.Resp.Body(), c.Resp.Header.String())
	}
}

func TestAdmittedAnswersCarryRemainingWhenAsked(t *testing.T) {
	e := newEnv()
	f := e.build(t, "r", "[{by: ip, rate: 10, burst: 10, headers: true}, {by: user, rate: 100}]")
	_, c := do(t, f, req{user: "x"})
	if string(c.Resp.Header.Peek("X-RateLimit-Remaining")) != "9" || string(c.Resp.Header.Peek("X-RateLimit-Limit")) != "10" ||
		c.Resp.Header.Peek("Retry-After") != nil {
		t.Fatalf("admitted: %s", c.Resp.Header.String())
	}
	g := e.build(t, "r2", "[{by: ip, rate: 10}]")
	if _, c := do(t, g, req{}); c.Resp.Header.Peek("X-RateLimit-Remaining") != nil {
		t.Fatal("headers on an admitted answer nobody asked for")
	}
}

func TestIPv6ClientsCountByPrefix(t *testing.T) {
	e := newEnv()
	f := e.build(t, "r", "[{by: ip, rate: 3, burst: 3}]")
	ok := 0
	for i := range 10 { // ten addresses of one /64
		if st, _ := do(t, f, req{ip: "2001:db8:1:2::" + strconv.FormatInt(int64(i+1), 16)}); st == 200 {
			ok++
		}
	}
	if ok != 3 {
		t.Fatalf("one /64 admitted %d, want 3", ok)
	}
	if st, _ := do(t, f, req{ip: "2001:db8:1:3::1"}); st != 200 {
		t.Fatal("another /64 refused")
	}
	g := e.build(t, "r2", "[{by: ip, rate: 3, burst: 3, ipv6_prefix: 128}]")
	for i := range 5 {
		if st, _ := do(t, g, req{ip: "2001:db8:1:2::" + strconv.FormatInt(int64(i+1), 16)}); st != 200 {
			t.Fatal("per address: refused")
		}
	}
	// IPv4-mapped addresses are IPv4 clients.
	h := e.build(t, "r3", "[{by: ip, rate: 1, burst: 1}]")
	do(t, h, req{ip: "192.0.2.77"})
	if st, _ := do(t, h, req{ip: "::ffff:192.0.2.77"}); st != 911 {
		t.Fatal("mapped address counted apart")
	}
}

type recordWaiter struct{ slept []time.Duration }

func (w *recordWaiter) Sleep(_ *pipeline.Ctx, d time.Duration)            { w.slept = append(w.slept, d) }
func (w *recordWaiter) Block(_ *pipeline.Ctx, call pipeline.BlockingCall) { call.Run() }

func TestLeakyBucketWaitsThroughTheContext(t *testing.T) {
	e := newEnv()
	f := e.build(t, "r", "[{rate: 10, algorithm: leaky_bucket, max_delay: 250ms}]")
	w := &recordWaiter{}
	var statuses []int
	for range 5 {
		c := req{}.ctx(t)
		c.SetWaiter(w)
		if f.Handle(c) == pipeline.Continue {
			statuses = append(statuses, 200)
		} else {
			statuses = append(statuses, c.Resp.StatusCode())
		}
	}
	if len(w.slept) != 2 || w.slept[0] != 100*time.Millisecond || w.slept[1] != 200*time.Millisecond {
		t.Fatalf("waits %v", w.slept)
	}
	if statuses[3] != 911 || statuses[4] != 911 {
		t.Fatalf("statuses %v", statuses)
	}
}

func TestRulesAreValidated(t *testing.T) {
	for text, want := range map[string]string{
		"[{by: ip}]":                                                  "rate is required",
		"[{by: ip, rate: 10, share: 0.5}]":                            "share is a fraction of a tier quota",
		"[{by: consumer, share: 1.5}]":                                "0 < share <= 1",
		"[{by: consumer, burst: 5}]":                                  "tier quota's burst",
		"[{by: ip, rate: 10, scope: global}]":                         "want local or cluster",
		"[{by: ip, rate: 10, algorithm: gcra}]":                       "want token_bucket",
		"[{by: session, rate: 1}]":                                    "header.NAME or cookie.NAME",
		"[{by: body.x, rate: 1}]":                                     "want query.",
		"[{by: ip, rate: 10, algorithm: fixed_window, burst: 20}]":    "burst applies to",
		"[{by: ip, rate: 10, status: 42}]":                            "not an HTTP status",
		"[{by: user, rate: 10, ipv6_prefix: 48}]":                     "ipv6_prefix applies",
		"[{by: ip, rate: 10, name: a}, {by: user, rate: 1, name: a}]": "used twice",
		"[{by: ip, rate: 10, per: 1us}]":                              "at least 1ms",
	} {
		err := buildErr(text)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", text, err, want)
		}
	}
}

func mustYAML(t testing.TB, text string, v any) {
	t.Helper()
	if err := yaml.Unmarshal([]byte(text), v); err != nil {
		t.Fatal(err)
	}
}

func TestReportsForMetricsAndAdmin(t *testing.T) {
	e := newEnv()
	f := e.build(t, "r", "[{by: ip, rate: 2, burst: 2, reject_for: 1m}, {by: consumer, scope: cluster, share: 0.5}]")
	count(t, f, req{consumer: "demo-app"}, 5)
	got := map[string]float64{}
	f.Report(func(fam *pipeline.Family, v float64, labels ...string) {
		if len(labels) != len(fam.Labels) {
			t.Fatalf("%s: labels %v for %v", fam.Name, labels, fam.Labels)
		}
		got[fam.Name+"|"+strings.Join(labels, ",")] = v
	})
	for k, want := range map[string]float64{
		"tollgate_limit_allowed_total|r.ip":         2,
		"tollgate_limit_refusals_total|r.ip,911":    3,
		"tollgate_limit_refusals_total|r.share,919": 0,
		"tollgate_limit_keys|r.ip":                  1,
		"tollgate_limit_live_nodes|r.share":         1,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], want, got)
		}
	}
	rules := f.Rules()
	if len(rules) != 2 || rules[0].Rule != "r.ip" || rules[0].Blocked != 2 || rules[0].Refused != 3 || rules[0].Mode != "local" ||
		rules[0].RejectFor != "1m0s" || rules[1].Mode != "local (no redis)" || !rules[1].TierQuota || rules[1].Share != 0.5 || rules[1].Status != 919 {
		t.Fatalf("rules: %+v", rules)
	}
}

func TestGlobalLimitsAreNamedGlobal(t *testing.T) {
	e := newEnv()
	f := e.build(t, "", "[{by: ip, rate: 1, burst: 1}]")
	count(t, f, req{}, 1)
	_, c := do(t, f, req{})
	if c.Decision != `rate limit "global.ip" exceeded` || c.Resp.StatusCode() != 911 {
		t.Fatalf("%d %q", c.Resp.StatusCode(), c.Decision)
	}
}
