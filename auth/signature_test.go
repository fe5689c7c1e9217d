package auth

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/clock"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/sign"
	"github.com/valyala/fasthttp"
)

const testSecret = "0123456789abcdef-secret"

type fixedClock struct{ ns atomic.Int64 }

func (f *fixedClock) now() time.Time { return time.Unix(0, f.ns.Load()) }

func newTestSignature(t testing.TB, cluster Claimer) (*Signature, *fixedClock) {
	t.Helper()
	cs, err := NewConsumers([]*Consumer{
		{AppKey: "demo-app", Secret: []byte(testSecret), Enabled: true},
		{AppKey: "off-app", Secret: []byte(testSecret), Enabled: false},
		{AppKey: "narrow", Secret: []byte(testSecret), Enabled: true, Routes: map[string]bool{"other": true}},
		{AppKey: "v2-app", Secret: []byte(testSecret), Enabled: true, SignV2: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	fc := &fixedClock{}
	fc.ns.Store(time.Unix(1_764_400_000, 0).UnixNano())
	s := NewSignature(SignatureConfig{
		Consumers: cs,
		Nonces:    NewNonceStore(NonceOptions{ExpectedRate: 1000, Cluster: cluster}),
		Now:       clock.New(fc.now, nil).Now,
		Route:     "signed",
		NewChecker: func() SigChecker {
			return sign.NewVerifier()
		},
	})
	return s, fc
}

// signedReq fills req with a request signed by sign (the client library).
func signedReq(t testing.TB, req *fasthttp.Request, appKey, query, form string, ts int64, nonce string) {
	t.Helper()
	req.Reset()
	req.Header.SetMethod("GET")
	req.SetRequestURI("/api/x?" + query)
	tsS := strconv.FormatInt(ts, 10)
	sig, err := sign.Sign(testSecret, query, form, tsS, nonce)
	if err != nil {
		t.Fatal(err)
	}
	if form != "" {
		req.Header.SetMethod("POST")
		req.Header.SetContentType("application/x-www-form-urlencoded")
		req.SetBodyString(form)
	}
	req.Header.Set("X-App-Key", appKey)
	req.Header.Set("X-Timestamp", tsS)
	req.Header.Set("X-Nonce", nonce)
	req.Header.Set("X-Sign", sig)
}

func handleSig(s *Signature, req *fasthttp.Request) (pipeline.Verdict, *fasthttp.Response, string) {
	resp := &fasthttp.Response{}
	c := pipeline.AcquireParsed(req, resp)
	defer pipeline.Release(c)
	v := s.Handle(c)
	return v, resp, c.Consumer
}

func TestSignatureOutcomes(t *testing.T) {
	s, fc := newTestSignature(t, nil)
	now := fc.now().Unix()
	var req fasthttp.Request
	signedReq(t, &req, "demo-app", "b=2&a=1&a=1", "", now, "n-1")
	if v, resp, who := handleSig(s, &req); v != pipeline.Continue || who != "demo-app" {
		t.Fatalf("valid: %v %s", v, resp.Body())
	}
	if _, resp, _ := handleSig(s, &req); resp.StatusCode() != 401 || !strings.Contains(string(resp.Body()), "replayed nonce") {
		t.Fatalf("replay: %d %s", resp.StatusCode(), resp.Body())
	}
	for _, tc := range []struct {
		name string
		mod  func(*fasthttp.Request)
		code int
		msg  string
	}{
		{"missing app key", func(r *fasthttp.Request) { r.Header.Del("X-App-Key") }, 401, "missing X-App-Key"},
		{"missing sign", func(r *fasthttp.Request) { r.Header.Del("X-Sign") }, 401, "missing X-Sign"},
		{"bad timestamp", func(r *fasthttp.Request) { r.Header.Set("X-Timestamp", "soon") }, 401, "unix seconds"},
		{"old timestamp", func(r *fasthttp.Request) { signedReq(t, r, "demo-app", "a=1", "", now-301, "n-old") }, 401, `"server_time":1764400000`},
		{"future timestamp", func(r *fasthttp.Request) { signedReq(t, r, "demo-app", "a=1", "", now+301, "n-new") }, 401, "outside the allowed window"},
		{"edge of window", func(r *fasthttp.Request) { signedReq(t, r, "demo-app", "a=1", "", now-300, "n-edge") }, 0, ""},
		{"unknown app", func(r *fasthttp.Request) { signedReq(t, r, "nobody", "a=1", "", now, "n-2") }, 401, "unknown app key"},
		{"disabled app", func(r *fasthttp.Request) { signedReq(t, r, "off-app", "a=1", "", now, "n-3") }, 401, "app key disabled"},
		{"not allowed", func(r *fasthttp.Request) { signedReq(t, r, "narrow", "a=1", "", now, "n-4") }, 403, "not allowed"},
		{"tampered", func(r *fasthttp.Request) {
			signedReq(t, r, "demo-app", "a=1", "", now, "n-5")
			r.SetRequestURI("/api/x?a=2")
		}, 401, "signature does not match"},
		{"bad nonce", func(r *fasthttp.Request) { signedReq(t, r, "demo-app", "a=1", "", now, "n 6") }, 401, "X-Nonce"},
		{"form", func(r *fasthttp.Request) { signedReq(t, r, "demo-app", "q=1", "amount=10&to=x", now, "n-7") }, 0, ""},
		{"form tampered", func(r *fasthttp.Request) {
			signedReq(t, r, "demo-app", "q=1", "amount=10", now, "n-8")
			r.SetBodyString("amount=99")
		}, 401, "signature does not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			signedReq(t, &req, "demo-app", "a=1", "", now, "fresh-"+tc.name[:3]+fmt.Sprint(len(tc.name)))
			tc.mod(&req)
			v, resp, _ := handleSig(s, &req)
			if tc.code == 0 {
				if v != pipeline.Continue {
					t.Fatalf("refused: %s", resp.Body())
				}
				return
			}
			if v != pipeline.Stop || resp.StatusCode() != tc.code || !strings.Contains(string(resp.Body()), tc.msg) {
				t.Fatalf("got %d %s, want %d %q", resp.StatusCode(), resp.Body(), tc.code, tc.msg)
			}
		})
	}
	// A forged signature does not burn the nonce for the real request.
	signedReq(t, &req, "demo-app", "a=1", "", now, "n-forge")
	real := fasthttp.Request{}
	req.CopyTo(&real)
	req.Header.Set("X-Sign", strings.Repeat("a", 64))
	if v, _, _ := handleSig(s, &req); v != pipeline.Stop {
		t.Fatal("forgery accepted")
	}
	if v, resp, _ := handleSig(s, &real); v != pipeline.Continue {
		t.Fatalf("real request after forgery: %s", resp.Body())
	}
}

// TestClockStepBackOpensNoWindow: after the host clock steps back an hour,
// a request signed an hour ago (its nonce long forgotten) is still stale.
func TestClockStepBackOpensNoWindow(t *testing.T) {
	s, fc := newTestSignature(t, nil)
	start := fc.now().Unix()
	var req fasthttp.Request
	signedReq(t, &req, "demo-app", "a=1", "", start, "early")
	if v, _, _ := handleSig(s, &req); v != pipeline.Continue {
		t.Fatal("first request refused")
	}
	// An hour passes: the nonce would be forgotten after 600s.
	fc.ns.Add(int64(time.Hour))
	var later fasthttp.Request
	signedReq(t, &later, "demo-app", "a=1", "", start+3600, "later")
	if v, _, _ := handleSig(s, &later); v != pipeline.Continue {
		t.Fatal("request an hour later refused")
	}
	// Now the host clock steps back to the start.
	fc.ns.Add(-int64(time.Hour))
	if v, resp, _ := handleSig(s, &req); v != pipeline.Stop || !strings.Contains(string(resp.Body()), "outside the allowed window") {
		t.Fatalf("replay after a clock step back: %d %s", resp.StatusCode(), resp.Body())
	}
}

// TestConcurrentClaimsOneWinner: many goroutines presenting the same
// signed request at once: exactly one gets through.
func TestConcurrentClaimsOneWinner(t *testing.T) {
	s, fc := newTestSignature(t, nil)
	var tmpl fasthttp.Request
	signedReq(t, &tmpl, "demo-app", "a=1", "", fc.now().Unix(), "race")
	var ok atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var req fasthttp.Request
			tmpl.CopyTo(&req)
			if v, _, _ := handleSig(s, &req); v == pipeline.Continue {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 1 {
		t.Fatalf("%d of 32 identical requests accepted, want 1", ok.Load())
	}
}

// claimerFunc adapts a function to Claimer.
type claimerFunc func(key string, ttl time.Duration) (bool, error)

func (f claimerFunc) Claim(key string, ttl time.Duration) (bool, error) { return f(key, ttl) }

func TestNonceStoreWithCluster(t *testing.T) {
	seen := map[string]bool{}
	var mu sync.Mutex
	down := false
	cl := claimerFunc(func(key string, ttl time.Duration) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return false, fmt.Errorf("down")
		}
		if ttl != 600*time.Second || !strings.HasPrefix(key, "tg:nonce:{app}:") {
			t.Errorf("claim %q ttl %v", key, ttl)
		}
		fresh := !seen[key]
		seen[key] = true
		return fresh, nil
	})
	a := NewNonceStore(NonceOptions{ExpectedRate: 1000, Cluster: cl})
	b := NewNonceStore(NonceOptions{ExpectedRate: 1000, Cluster: cl})
	now := time.Now()
	if !a.Claim([]byte("app"), []byte("n1"), now) {
		t.Fatal("fresh nonce refused")
	}
	if b.Claim([]byte("app"), []byte("n1"), now) {
		t.Fatal("nonce used on node A accepted on node B")
	}
	if a.Claim([]byte("app"), []byte("n1"), now) {
		t.Fatal("replay on the same node accepted")
	}
	mu.Lock()
	down = true
	mu.Unlock()
	if !a.Claim([]byte("app"), []byte("n2"), now) || a.Claim([]byte("app"), []byte("n2"), now) {
		t.Fatal("degraded node must accept fresh nonces and refuse its own replays")
	}
	if _, degraded := a.Stats(); degraded != 1 {
		t.Fatalf("degraded claims %d, want 1", degraded)
	}
}

// TestNonceMemoryBoundedAndRotates: the filter's memory is fixed, and a
// nonce is remembered at least TTL and forgotten well after.
func TestNonceMemoryBoundedAndRotates(t *testing.T) {
	s := NewNonceStore(NonceOptions{TTL: 10 * time.Second, ExpectedRate: 50000})
	mem := s.MemoryBytes()
	base := time.Unix(1_764_400_000, 0)
	if !s.Claim([]byte("a"), []byte("kept"), base) {
		t.Fatal("fresh")
	}
	for i := 1; i <= 200000; i++ {
		at := base.Add(time.Duration(i) * 50 * time.Microsecond) // 10 s of 20k/s
		s.Claim([]byte("a"), []byte("n"+strconv.Itoa(i)), at)
	}
	if s.Claim([]byte("a"), []byte("kept"), base.Add(9*time.Second)) {
		t.Fatal("a nonce was forgotten within its TTL")
	}
	if s.MemoryBytes() != mem {
		t.Fatal("filter memory changed")
	}
	s.Claim([]byte("a"), []byte("tick"), base.Add(16*time.Second))
	s.Claim([]byte("a"), []byte("tick2"), base.Add(22*time.Second))
	if !s.Claim([]byte("a"), []byte("kept"), base.Add(30*time.Second)) {
		t.Fatal("a nonce was never forgotten")
	}
	replays, _ := s.Stats()
	t.Logf("filter memory %d KiB for 50k/s over 10s; false replays among 200k fresh nonces: %d", mem>>10, replays-1)
	if replays > 25 { // 1 real replay above, plus false positives at 1e-4
		t.Fatalf("%d replays reported among fresh nonces", replays)
	}
}

// signedStream yields signed requests with fresh nonces on one reused
// fasthttp.Request, as a transport would: only the nonce and signature
// headers change from one request to the next.
type signedStream struct {
	req    fasthttp.Request
	nonces []string
	sigs   []string
	i      int
}

const benchQuery = "channel=app&page=2&sort=desc&user_id=42&v=2"

func newSignedStream(t testing.TB, n int, ts int64) *signedStream {
	st := &signedStream{}
	signedReq(t, &st.req, "demo-app", benchQuery, "", ts, "nonce-0")
	tsS := strconv.FormatInt(ts, 10)
	for i := range n {
		nonce := "nonce-" + strconv.Itoa(i)
		sig, err := sign.Sign(testSecret, benchQuery, "", tsS, nonce)
		if err != nil {
			t.Fatal(err)
		}
		st.nonces = append(st.nonces, nonce)
		st.sigs = append(st.sigs, sig)
	}
	return st
}

func (st *signedStream) next() *fasthttp.Request {
	k := st.i % len(st.nonces)
	st.i++
	st.req.Header.Set("X-Nonce", st.nonces[k])
	st.req.Header.Set("X-Sign", st.sigs[k])
	return &st.req
}

// newSignedStreamV2 is newSignedStream for a scheme v2 consumer sending a
// JSON POST.
func newSignedStreamV2(t testing.TB, n int, ts int64) *signedStream {
	const path, body = "/api/orders", `{"sku":"A-1024","qty":2,"note":"gift wrap"}`
	st := &signedStream{}
	signedReqV2(t, &st.req, "v2-app", "POST", path, benchQuery, "application/json", body, ts, "nonce-0")
	tsS := strconv.FormatInt(ts, 10)
	for i := range n {
		nonce := "nonce-" + strconv.Itoa(i)
		sig, err := sign.SignV2(testSecret, sign.Request{Method: "POST", Path: path, Query: benchQuery,
			ContentType: "application/json", Body: body, Timestamp: tsS, Nonce: nonce})
		if err != nil {
			t.Fatal(err)
		}
		st.nonces = append(st.nonces, nonce)
		st.sigs = append(st.sigs, sig)
	}
	return st
}

func BenchmarkSignatureVerify(b *testing.B) {
	s, fc := newTestSignature(b, nil)
	st := newSignedStream(b, 1<<20, fc.now().Unix())
	var resp fasthttp.Response
	b.ReportAllocs()
	for b.Loop() {
		c := pipeline.AcquireParsed(st.next(), &resp)
		s.Handle(c)
		pipeline.Release(c)
	}
}

func BenchmarkSignatureVerifyV2(b *testing.B) {
	s, fc := newTestSignature(b, nil)
	st := newSignedStreamV2(b, 1<<20, fc.now().Unix())
	var resp fasthttp.Response
	b.ReportAllocs()
	for b.Loop() {
		c := pipeline.AcquireParsed(st.next(), &resp)
		s.Handle(c)
		pipeline.Release(c)
	}
}

func BenchmarkNonceFastPath(b *testing.B) {
	s := NewNonceStore(NonceOptions{})
	app := []byte("demo-app")
	nonce := []byte("0123456789abcdef0123456789abcdef")
	now := time.Now()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		nonce[i%32] ^= byte(i)
		s.Claim(app, nonce, now)
		i++
	}
}

// TestSignatureRepeatedParameter: only the first value of a repeated
// parameter is signed, so a request that repeats a signed parameter with
// another value ("amount=1&amount=1000", the upstream seeing both) is
// refused with 400 before its signature is even checked; identical
// repeats pass.
func TestSignatureRepeatedParameter(t *testing.T) {
	s, fc := newTestSignature(t, nil)
	now := fc.now().Unix()
	// attack signs query+form as the client meant them, then sends
	// sentQuery and sentForm with that signature.
	attack := func(req *fasthttp.Request, appKey, query, form, sentQuery, sentForm, nonce string) {
		t.Helper()
		signedReq(t, req, appKey, query, form, now, nonce)
		req.SetRequestURI("/api/x?" + sentQuery)
		if sentForm != "" {
			req.Header.SetMethod("POST")
			req.Header.SetContentType("application/x-www-form-urlencoded")
			req.SetBodyString(sentForm)
		}
	}
	for _, tc := range []struct {
		name                string
		query, form         string // signed
		sentQuery, sentForm string // sent
		key                 string // in the message; "" = accepted
	}{
		{"query", "amount=1", "", "amount=1&amount=1000", "", "amount"},
		{"query, signed value last", "amount=1", "", "amount=1000&amount=1", "", "amount"},
		{"form", "", "amount=1", "", "amount=1&amount=1000", "amount"},
		{"query and form", "amount=1", "", "amount=1", "amount=1000", "amount"},
		{"encoded key", "amount=1", "", "amount=1&%61mount=1000", "", "amount"},
		{"empty value", "to=x", "", "to=x&to=", "", "to"},
		{"key escaped in the message", "", "", "%22%5C%0A=1&%22%5C%0A=2", "", `\"\\\n`},
		{"long key cut", "", "", strings.Repeat("k", 100) + "=1&" + strings.Repeat("k", 100) + "=2", "", strings.Repeat("k", 64) + "..."},
		{"identical repeat", "amount=1&amount=1", "", "amount=1&amount=1", "", ""},
		{"identical in query and form", "amount=1", "amount=1", "amount=1", "amount=1", ""},
		{"same value, other spelling", "a=x+y&a=x%20y", "", "a=x+y&a=x%20y", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var req fasthttp.Request
			nonce := "rep-" + strings.ReplaceAll(tc.name, " ", "-")
			attack(&req, "demo-app", tc.query, tc.form, tc.sentQuery, tc.sentForm, nonce)
			v, resp, who := handleSig(s, &req)
			if tc.key == "" {
				if v != pipeline.Continue || who != "demo-app" {
					t.Fatalf("refused: %d %s", resp.StatusCode(), resp.Body())
				}
				return
			}
			want := `{"code":400,"message":"repeated parameter with different values: ` + tc.key + `","trace_id":"`
			if v != pipeline.Stop || resp.StatusCode() != 400 || !strings.HasPrefix(string(resp.Body()), want) ||
				string(resp.Header.ContentType()) != "application/json" {
				t.Fatalf("got %d %s, want 400 %s...", resp.StatusCode(), resp.Body(), want)
			}
			var body struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			// (The test Ctx has no trace id: zero bytes where its hex goes.)
			if err := json.Unmarshal(bytes.ReplaceAll(resp.Body(), []byte{0}, []byte("0")), &body); err != nil ||
				body.Code != 400 || !strings.HasPrefix(body.Message, "repeated parameter with different values: ") {
				t.Fatalf("body is not the error JSON: %v %s", err, resp.Body())
			}
			// The refusal did not burn the nonce.
			signedReq(t, &req, "demo-app", "amount=1", "", now, nonce)
			if v, resp, _ := handleSig(s, &req); v != pipeline.Continue {
				t.Fatalf("the nonce of a refused request was burnt: %s", resp.Body())
			}
		})
	}
	// Scheme v2 consumers are held to the same rule.
	var req fasthttp.Request
	signedReqV2(t, &req, "v2-app", "POST", "/api/pay", "amount=1", "application/json", `{}`, now, "rep-v2")
	req.SetRequestURI("/api/pay?amount=1&amount=1000")
	if v, resp, _ := handleSig(s, &req); v != pipeline.Stop || resp.StatusCode() != 400 ||
		!strings.Contains(string(resp.Body()), "repeated parameter with different values: amount") {
		t.Fatalf("v2: %d %s", resp.StatusCode(), resp.Body())
	}
}

// signedReqV2 fills req with a request signed with scheme v2 by the client
// library.
func signedReqV2(t testing.TB, req *fasthttp.Request, appKey, method, path, query, ct, body string, ts int64, nonce string) {
	t.Helper()
	req.Reset()
	req.Header.SetMethod(method)
	uri := path
	if query != "" {
		uri += "?" + query
	}
	req.SetRequestURI(uri)
	if ct != "" {
		req.Header.SetContentType(ct)
	}
	if body != "" {
		req.SetBodyString(body)
	}
	tsS := strconv.FormatInt(ts, 10)
	sig, err := sign.SignV2(testSecret, sign.Request{Method: method, Path: path, Query: query, ContentType: ct,
		Body: body, Timestamp: tsS, Nonce: nonce})
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-App-Key", appKey)
	req.Header.Set("X-Timestamp", tsS)
	req.Header.Set("X-Nonce", nonce)
	req.Header.Set("X-Sign", sig)
}

// TestSignatureV2: a consumer with SignV2 is checked with scheme v2 only;
// the method, the path and the body are signed.
func TestSignatureV2(t *testing.T) {
	s, fc := newTestSignature(t, nil)
	now := fc.now().Unix()
	var req fasthttp.Request
	n := 0
	nonce := func() string { n++; return "v2-" + strconv.Itoa(n) }
	for _, tc := range []struct {
		name                    string
		method, path, query, ct string
		body                    string
		mod                     func(*fasthttp.Request)
		code                    int
		msg                     string
	}{
		{name: "GET", method: "GET", path: "/api/orders", query: "b=2&a=x+y"},
		{name: "JSON POST", method: "POST", path: "/api/orders", ct: "application/json", body: `{"amount":"19.90"}`},
		{name: "form POST", method: "POST", path: "/api/pay", query: "channel=app", ct: "application/x-www-form-urlencoded", body: "amount=1&to=%40bob"},
		{name: "reserved escape in path", method: "GET", path: "/api/files/a%2Fb;v=1"},
		{name: "absolute-form target", method: "GET", path: "/api/orders", query: "a=1",
			mod: func(r *fasthttp.Request) { r.Header.SetRequestURI("http://api.example.com/api/orders?a=1") }},
		{name: "JSON body changed", method: "POST", path: "/api/orders", ct: "application/json", body: `{"amount":"1"}`,
			mod: func(r *fasthttp.Request) { r.SetBodyString(`{"amount":"1000"}`) }, code: 401, msg: "signature does not match"},
		{name: "method changed", method: "POST", path: "/api/orders/42",
			mod: func(r *fasthttp.Request) { r.Header.SetMethod("DELETE") }, code: 401, msg: "signature does not match"},
		{name: "path changed", method: "GET", path: "/api/orders/42",
			mod: func(r *fasthttp.Request) { r.SetRequestURI("/api/orders/43") }, code: 401, msg: "signature does not match"},
		{name: "path not canonical", method: "GET", path: "/api/x",
			mod: func(r *fasthttp.Request) { r.SetRequestURI("/api/%7Ex") }, code: 401, msg: "path not in canonical form"},
		// What is signed is the path the gateway routes and forwards: another
		// spelling of the same canonical path is that path.
		{name: "escaped unreserved character", method: "GET", path: "/api/~x",
			mod: func(r *fasthttp.Request) { r.SetRequestURI("/api/%7Ex") }},
		{name: "dot segment", method: "GET", path: "/api/x",
			mod: func(r *fasthttp.Request) { r.Header.SetRequestURI("/api/y/../x") }},
		{name: "lower-case escape", method: "GET", path: "/api/a%2Fb",
			mod: func(r *fasthttp.Request) { r.Header.SetRequestURI("/api/a%2fb") }},
		{name: "v1 signature", method: "GET", path: "/api/x", query: "a=1",
			mod: func(r *fasthttp.Request) {
				sig, _ := sign.Sign(testSecret, "a=1", "", string(r.Header.Peek("X-Timestamp")), string(r.Header.Peek("X-Nonce")))
				r.Header.Set("X-Sign", sig)
			}, code: 401, msg: "signature does not match"},
		{name: "v2 signature from a v1 consumer", method: "GET", path: "/api/x", query: "a=1",
			mod: func(r *fasthttp.Request) { r.Header.Set("X-App-Key", "demo-app") }, code: 401, msg: "signature does not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			signedReqV2(t, &req, "v2-app", tc.method, tc.path, tc.query, tc.ct, tc.body, now, nonce())
			if tc.mod != nil {
				tc.mod(&req)
			}
			v, resp, who := handleSig(s, &req)
			if tc.code == 0 {
				if v != pipeline.Continue || who != "v2-app" {
					t.Fatalf("refused: %d %s", resp.StatusCode(), resp.Body())
				}
				return
			}
			if v != pipeline.Stop || resp.StatusCode() != tc.code || !strings.Contains(string(resp.Body()), tc.msg) {
				t.Fatalf("got %d %s, want %d %q", resp.StatusCode(), resp.Body(), tc.code, tc.msg)
			}
		})
	}
	// A streamed body cannot be hashed: refused.
	signedReqV2(t, &req, "v2-app", "POST", "/api/upload", "", "application/octet-stream", "", now, nonce())
	req.SetBodyStream(strings.NewReader("big"), -1)
	if v, resp, _ := handleSig(s, &req); v != pipeline.Stop || resp.StatusCode() != 401 ||
		!strings.Contains(string(resp.Body()), "body too large") {
		t.Fatalf("streamed body: %d %s", resp.StatusCode(), resp.Body())
	}
}
