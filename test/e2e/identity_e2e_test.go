//go:build e2e

package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/sign"
	"github.com/valyala/fasthttp"
)

const demoSecret = "s3cret-for-tests-0123456789"

func identityConfig(upAddr string) string {
	return fmt.Sprintf(`
watch: false
consumers:
  - {app_key: demo-app, secret: %q, tier: basic}
  - {app_key: off-app, secret: %q, enabled: false}
  - {app_key: narrow-app, secret: %q, routes: [other]}
jwt:
  issuer: https://id.example.com
  audience: api
  leeway: 5s
  keys:
    - {kid: k1, alg: HS256, secret: "jwt-secret-for-tests-0123456789abcdef"}
services:
  up: {instances: [{addr: %q}]}
routes:
  - {name: signed, match: {prefix: /api/}, auth: signature, service: up}
  - {name: tokens, match: {prefix: /me/}, auth: jwt, service: up}
  - {name: open, match: {prefix: /open/}, service: up}
  - {name: other, match: {prefix: /other/}, auth: signature, service: up}
`, demoSecret, demoSecret, demoSecret, upAddr)
}

// signed builds a signed request for the gateway at addr.
func signed(t *testing.T, addr, method, target, form string, appKey string, now time.Time, nonce string) *fasthttp.Request {
	t.Helper()
	u, err := url.Parse("http://" + addr + target)
	if err != nil {
		t.Fatal(err)
	}
	h, err := sign.Headers(appKey, demoSecret, method, u, form, now, nonce)
	if err != nil {
		t.Fatal(err)
	}
	req := &fasthttp.Request{}
	req.SetRequestURI(u.String())
	req.Header.SetMethod(method)
	for k, vs := range h {
		req.Header.Set(k, vs[0])
	}
	if form != "" {
		req.Header.SetContentType("application/x-www-form-urlencoded")
		req.SetBodyString(form)
	}
	return req
}

func send(t *testing.T, addr string, req *fasthttp.Request) (int, string) {
	t.Helper()
	r := &fasthttp.Request{}
	req.CopyTo(r)
	r.SetHost(addr)
	var resp fasthttp.Response
	if err := fasthttp.DoTimeout(r, &resp, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode(), string(resp.Body())
}

func TestSignedRequestsAcrossTwoNodes(t *testing.T) {
	rd := testutil.StartRedis(t)
	up := testutil.StartUpstream(t, "ok")
	cfg := writeConfig(t, identityConfig(up.Addr))
	a, b := freePort(t), freePort(t)
	env := []string{"TOLLGATE_REDIS=" + rd.Addr}
	startProc(t, a, "off", env, "run", "-c", cfg)
	startProc(t, b, "off", env, "run", "-c", cfg)

	now := time.Now()
	req := signed(t, a, "GET", "/api/orders?page=2&sort=desc", "", "demo-app", now, sign.NewNonce())
	req.Header.Set("X-Consumer", "forged")
	if st, body := send(t, a, req); st != 200 {
		t.Fatalf("signed request: %d %s", st, body)
	}
	if got := up.Last().Header("X-Consumer"); got != "demo-app" {
		t.Fatalf("upstream X-Consumer %q, want demo-app", got)
	}
	// The same request replayed to the other node is refused.
	if st, body := send(t, b, req); st != 401 || !strings.Contains(body, "replayed nonce") {
		t.Fatalf("replay on node B: %d %s", st, body)
	}
	if st, body := send(t, a, req); st != 401 || !strings.Contains(body, "replayed nonce") {
		t.Fatalf("replay on node A: %d %s", st, body)
	}
	// A signed form POST: form parameters are signed, and the body still
	// reaches the upstream whole.
	form := "amount=100&merchant_id=42&note=a+b%26c"
	post := signed(t, b, "POST", "/api/pay?channel=app", form, "demo-app", now, sign.NewNonce())
	if st, body := send(t, b, post); st != 200 || string(up.Last().Body) != form {
		t.Fatalf("signed form POST: %d %s, upstream body %q", st, body, up.Last().Body)
	}

	cases := []struct {
		name string
		req  func() *fasthttp.Request
		code int
		msg  string
	}{
		{"tampered parameter", func() *fasthttp.Request {
			r := signed(t, a, "GET", "/api/orders?page=2", "", "demo-app", now, sign.NewNonce())
			r.SetRequestURI("http://" + a + "/api/orders?page=3")
			return r
		}, 401, "signature does not match"},
		{"tampered form", func() *fasthttp.Request {
			r := signed(t, a, "POST", "/api/pay", "amount=1", "demo-app", now, sign.NewNonce())
			r.SetBodyString("amount=1000")
			return r
		}, 401, "signature does not match"},
		{"skewed clock", func() *fasthttp.Request {
			return signed(t, a, "GET", "/api/x", "", "demo-app", now.Add(-10*time.Minute), sign.NewNonce())
		}, 401, `"server_time":`},
		{"unknown app", func() *fasthttp.Request {
			return signed(t, a, "GET", "/api/x", "", "who", now, sign.NewNonce())
		}, 401, "unknown app key"},
		{"disabled app", func() *fasthttp.Request {
			return signed(t, a, "GET", "/api/x", "", "off-app", now, sign.NewNonce())
		}, 401, "app key disabled"},
		{"route not allowed", func() *fasthttp.Request {
			return signed(t, a, "GET", "/api/x", "", "narrow-app", now, sign.NewNonce())
		}, 403, "not allowed"},
		{"missing header", func() *fasthttp.Request {
			r := signed(t, a, "GET", "/api/x", "", "demo-app", now, sign.NewNonce())
			r.Header.Del("X-Nonce")
			return r
		}, 401, "missing X-Nonce"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, body := send(t, a, tc.req())
			if st != tc.code || !strings.Contains(body, tc.msg) || !strings.Contains(body, `"code":`+strconv.Itoa(tc.code)) {
				t.Fatalf("got %d %s, want %d with %q", st, body, tc.code, tc.msg)
			}
		})
	}
	// A forged request does not burn the real client's nonce.
	nonce := sign.NewNonce()
	forged := signed(t, a, "GET", "/api/x?v=1", "", "demo-app", now, nonce)
	forged.Header.Set("X-Sign", strings.Repeat("0", 64))
	if st, _ := send(t, a, forged); st != 401 {
		t.Fatalf("forged: %d", st)
	}
	if st, body := send(t, b, signed(t, b, "GET", "/api/x?v=1", "", "demo-app", now, nonce)); st != 200 {
		t.Fatalf("real request after a forgery with its nonce: %d %s", st, body)
	}
	// The identity header is the gateway's word only.
	open := &fasthttp.Request{}
	open.SetRequestURI("http://" + a + "/open/x")
	open.Header.Set("X-Consumer", "forged")
	open.Header.Set("X-User-Id", "forged")
	if st, _ := send(t, a, open); st != 200 || up.Last().Header("X-Consumer") != "" || up.Last().Header("X-User-Id") != "" {
		t.Fatalf("client identity headers forwarded on an open route: %v", up.Last().Headers)
	}
}

// hs256 signs claims for the test key.
func hs256(t *testing.T, claims map[string]any) string {
	t.Helper()
	head := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT","kid":"k1"}`))
	body, _ := json.Marshal(claims)
	unsigned := head + "." + base64.RawURLEncoding.EncodeToString(body)
	m := hmac.New(sha256.New, []byte("jwt-secret-for-tests-0123456789abcdef"))
	m.Write([]byte(unsigned))
	return unsigned + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func bearer(t *testing.T, addr, token string) (int, string) {
	req := &fasthttp.Request{}
	req.SetRequestURI("http://" + addr + "/me/profile")
	req.Header.Set("Authorization", "Bearer "+token)
	return send(t, addr, req)
}

func TestRevokedJWTRefusedEverywhereWithinASecond(t *testing.T) {
	rd := testutil.StartRedis(t)
	up := testutil.StartUpstream(t, "ok")
	cfg := writeConfig(t, identityConfig(up.Addr))
	a, b, adminB := freePort(t), freePort(t), freePort(t)
	env := []string{"TOLLGATE_REDIS=" + rd.Addr, "TOLLGATE_ADMIN_TOKEN=adm1n"}
	startProc(t, a, "off", env, "run", "-c", cfg)
	startProc(t, b, adminB, env, "run", "-c", cfg)

	exp := time.Now().Add(time.Hour).Unix()
	tok := hs256(t, map[string]any{"sub": "user-7", "jti": "tok-1", "iss": "https://id.example.com", "aud": "api", "exp": exp})
	other := hs256(t, map[string]any{"sub": "user-8", "jti": "tok-2", "iss": "https://id.example.com", "aud": []string{"x", "api"}, "exp": exp})
	for _, addr := range []string{a, b} {
		if st, body := bearer(t, addr, tok); st != 200 {
			t.Fatalf("valid token on %s: %d %s", addr, st, body)
		}
	}
	if up.Last().Header("X-User-Id") != "user-7" || up.Last().Header("X-Consumer") != "jwt:user-7" {
		t.Fatalf("identity not forwarded: %v", up.Last().Headers)
	}
	if st, body := bearer(t, a, hs256(t, map[string]any{"sub": "u", "iss": "https://id.example.com", "aud": "api", "exp": time.Now().Add(-time.Minute).Unix()})); st != 401 || !strings.Contains(body, "expired") {
		t.Fatalf("expired token: %d %s", st, body)
	}

	// Load of valid tokens: no Redis reads per request.
	before, err := rd.CommandStat("zrange")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 500 {
				if st, _ := bearer(t, a, other); st != 200 {
					t.Errorf("valid token refused: %d", st)
					return
				}
			}
		}()
	}
	wg.Wait()
	after, _ := rd.CommandStat("zrange")
	if after-before > 20 {
		t.Fatalf("%d ZRANGE calls during 2000 requests: Redis is read per request", after-before)
	}
	t.Logf("ZRANGE calls during 2000 token requests: %d", after-before)

	// Revoke by jti in Redis (as an operator would) and time the refusal.
	revokedAt := time.Now()
	expMs := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	if _, err := rd.Command("ZADD", "tollgate:revoked", expMs, "jti:tok-1"); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{a, b} {
		for {
			st, body := bearer(t, addr, tok)
			if st == 401 && strings.Contains(body, "revoked") {
				break
			}
			if time.Since(revokedAt) > time.Second {
				t.Fatalf("node %s still accepts the revoked token after 1s: %d %s", addr, st, body)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	t.Logf("revocation refused on both nodes %v after the write", time.Since(revokedAt))
	if st, _ := bearer(t, b, other); st != 200 {
		t.Fatal("another token was hit by the revocation")
	}
	// Revoking a subject through node B's admin API reaches node A.
	rev := &fasthttp.Request{}
	rev.SetRequestURI("http://" + adminB + "/admin/revoke")
	rev.Header.SetMethod("POST")
	rev.Header.Set("Authorization", "Bearer adm1n")
	rev.SetBodyString(`{"sub":"user-8","ttl":"1h"}`)
	var revResp fasthttp.Response
	if err := fasthttp.DoTimeout(rev, &revResp, 3*time.Second); err != nil || revResp.StatusCode() != 200 {
		t.Fatalf("admin revoke: %v %d %s", err, revResp.StatusCode(), revResp.Body())
	}
	revokedAt = time.Now()
	for {
		if st, _ := bearer(t, a, other); st == 401 {
			break
		}
		if time.Since(revokedAt) > time.Second {
			t.Fatal("a subject revoked through the admin API is still accepted after 1s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestJWTIdentityRules: a token's caller is "jwt:<sub>" upstream, never a
// signed consumer's app key; a token without exp is refused unless the
// jwt section says require_exp: false; and revocations of ids and
// subjects of any length, written to Redis or through the admin API, reach
// every node.
func TestJWTIdentityRules(t *testing.T) {
	rd := testutil.StartRedis(t)
	up := testutil.StartUpstream(t, "ok")
	strict := identityConfig(up.Addr)
	lax := strings.Replace(strict, "  leeway: 5s\n", "  leeway: 5s\n  require_exp: false\n", 1)
	if lax == strict {
		t.Fatal("require_exp not added")
	}
	a, adminA, b := freePort(t), freePort(t), freePort(t)
	env := []string{"TOLLGATE_REDIS=" + rd.Addr, "TOLLGATE_ADMIN_TOKEN=adm1n"}
	startProc(t, a, adminA, env, "run", "-c", writeConfig(t, strict))
	startProc(t, b, "off", env, "run", "-c", writeConfig(t, lax))

	exp := time.Now().Add(time.Hour).Unix()
	token := func(sub, jti string, withExp bool) string {
		c := map[string]any{"sub": sub, "iss": "https://id.example.com", "aud": "api"}
		if jti != "" {
			c["jti"] = jti
		}
		if withExp {
			c["exp"] = exp
		}
		return hs256(t, c)
	}

	// A subject spelled like a signed consumer's app key.
	if st, body := bearer(t, a, token("demo-app", "", true)); st != 200 ||
		up.Last().Header("X-Consumer") != "jwt:demo-app" || up.Last().Header("X-User-Id") != "demo-app" {
		t.Fatalf("token for sub demo-app: %d %s, upstream %v", st, body, up.Last().Headers)
	}

	noExp := token("user-9", "", false)
	if st, body := bearer(t, a, noExp); st != 401 || !strings.Contains(body, "JWT has no expiry") {
		t.Fatalf("token without exp: %d %s", st, body)
	}
	if st, body := bearer(t, b, noExp); st != 200 {
		t.Fatalf("token without exp where require_exp is false: %d %s", st, body)
	}

	long := func(c byte, n int) string { return strings.Repeat(string(c), n) }
	byJTI := token("user-1", long('j', 300), true)
	bySub := token(long('s', 300), "", true)
	byHugeJTI := token("user-2", long('J', 2500), true)
	neighbour := token("user-3", long('j', 299), true)
	for _, tok := range []string{byJTI, bySub, byHugeJTI, neighbour} {
		for _, addr := range []string{a, b} {
			if st, body := bearer(t, addr, tok); st != 200 {
				t.Fatalf("before any revocation, on %s: %d %s", addr, st, body)
			}
		}
	}
	expMs := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	if _, err := rd.Command("ZADD", "tollgate:revoked", expMs, "jti:"+long('j', 300)); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`{"sub":"` + long('s', 300) + `"}`, `{"jti":"` + long('J', 2500) + `"}`} {
		rev := &fasthttp.Request{}
		rev.SetRequestURI("http://" + adminA + "/admin/revoke")
		rev.Header.SetMethod("POST")
		rev.Header.Set("Authorization", "Bearer adm1n")
		rev.SetBodyString(body)
		var resp fasthttp.Response
		if err := fasthttp.DoTimeout(rev, &resp, 3*time.Second); err != nil || resp.StatusCode() != 200 {
			t.Fatalf("admin revoke of %d bytes: %v %d %s", len(body), err, resp.StatusCode(), resp.Body())
		}
	}
	revokedAt := time.Now()
	for name, tok := range map[string]string{"jti of 300 bytes": byJTI, "sub of 300 bytes": bySub, "jti of 2500 bytes": byHugeJTI} {
		for _, addr := range []string{a, b} {
			for {
				st, body := bearer(t, addr, tok)
				if st == 401 && strings.Contains(body, "revoked") {
					break
				}
				if time.Since(revokedAt) > time.Second {
					t.Fatalf("%s: node %s still accepts the revoked token after 1s: %d %s", name, addr, st, body)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	if st, body := bearer(t, a, neighbour); st != 200 {
		t.Fatalf("a token whose jti is a prefix of a revoked one: %d %s", st, body)
	}
}

// TestFrozenRedisDoesNotStallSignedRequests: with Redis stopped (SIGSTOP)
// signed requests keep the p99 the same load saw with Redis running, to
// within half the nonce budget plus 5 ms, and never fail with 5xx;
// after SIGCONT cluster-wide replay protection is back by itself. That no
// single call waits past the budget is the cluster client's test
// (TestFrozenRedisBoundedAndRecovers).
func TestFrozenRedisDoesNotStallSignedRequests(t *testing.T) {
	rd := testutil.StartRedis(t)
	up := testutil.StartQuietUpstream(t, "ok")
	cfg := writeConfig(t, identityConfig(up.Addr))
	a, b := freePort(t), freePort(t)
	const budget = 20 * time.Millisecond
	env := []string{"TOLLGATE_REDIS=" + rd.Addr, "TOLLGATE_REDIS_BUDGET=" + budget.String()}
	startProc(t, a, "off", env, "run", "-c", cfg)
	startProc(t, b, "off", env, "run", "-c", cfg)

	// load sends signed requests from 8 clients for d and returns their
	// latencies, sorted, and how many were not answered 200.
	load := func(d time.Duration) ([]time.Duration, int) {
		var mu sync.Mutex
		var lat []time.Duration
		bad := 0
		var wg sync.WaitGroup
		deadline := time.Now().Add(d)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				client := &fasthttp.HostClient{Addr: a}
				for time.Now().Before(deadline) {
					req := signed(t, a, "GET", "/api/x", "", "demo-app", time.Now(), sign.NewNonce())
					var resp fasthttp.Response
					start := time.Now()
					err := client.DoTimeout(req, &resp, 5*time.Second)
					d := time.Since(start)
					mu.Lock()
					lat = append(lat, d)
					if err != nil || resp.StatusCode() != 200 {
						bad++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		slices.Sort(lat)
		return lat, bad
	}

	// The same load with Redis running: what this host adds to a request
	// on its own. The frozen phase may add the budget to it, not more.
	healthy, bad := load(time.Second)
	if bad != 0 {
		t.Fatalf("%d requests failed with Redis running", bad)
	}
	healthyP99 := healthy[len(healthy)*99/100]

	rd.Freeze()
	lat, bad := load(3 * time.Second)
	p99 := lat[len(lat)*99/100]
	t.Logf("Redis running: %d signed requests, p99 %v; frozen: %d, p50 %v, p99 %v, max %v, %d not 200",
		len(healthy), healthyP99, len(lat), lat[len(lat)/2], p99, lat[len(lat)-1], bad)
	if bad != 0 {
		t.Fatalf("%d requests failed while Redis was frozen", bad)
	}
	// Degraded, the node refuses the cluster's claim at once and checks
	// the nonce on its own: only the claims in flight when Redis froze, and
	// the probes for its return, wait the budget. A node that waited on
	// every claim (p99 at least the budget on top of the healthy p99) fails
	// this, as does one that waited past the budget.
	if limit := healthyP99 + budget/2 + 5*time.Millisecond; p99 > limit {
		t.Fatalf("p99 %v while Redis was frozen, want within %v (with Redis running) + half the %v budget + 5ms", p99, healthyP99, budget)
	}
	rd.Thaw()
	// Recovery: within a few seconds a replay across nodes is refused again.
	recoverBy := time.Now().Add(5 * time.Second)
	for {
		req := signed(t, a, "GET", "/api/y", "", "demo-app", time.Now(), sign.NewNonce())
		if st, _ := send(t, a, req); st != 200 {
			t.Fatalf("after thaw: %d", st)
		}
		time.Sleep(50 * time.Millisecond)
		if st, body := send(t, b, req); st == 401 && strings.Contains(body, "replayed") {
			break
		}
		if time.Now().After(recoverBy) {
			t.Fatal("cluster-wide replay protection did not come back after SIGCONT")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
