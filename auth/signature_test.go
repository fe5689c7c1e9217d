package auth

import (
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
	})
	if err != nil {
		t.Fatal(err)
	}
	fc := &fixedClock{}
	fc.ns.Store(time.Unix(1_764_400_000, 0).UnixNano())
	s := NewSignature(SignatureConfig{
		Consumers: cs,
		Nonces:    NewNonceStore(NonceOptions{ExpectedRate: 1000, Cluster: cluster}),
		Clock:     clock.New(fc.now, nil),
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
	c := pipeline.Acquire(req, resp)
	defer pipeline.Release(c)
	v := s.Handle(c)
	return v, resp, c.Consumer
}

func TestSignatureOutcomes(t *testing.T) {
	s, fc := newTestSignature(t, nil)
	now := fc.now().Unix()
	var req fasthttp.Request
	signedReq(t, &req, "demo-app", "b=2&a=1&a=9", "", now, "n-1")
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

func (f claimerFunc) ClaimNonce(key string, ttl time.Duration) (bool, error) { return f(key, ttl) }

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

func BenchmarkSignatureVerify(b *testing.B) {
	s, fc := newTestSignature(b, nil)
	st := newSignedStream(b, 1<<20, fc.now().Unix())
	var resp fasthttp.Response
	b.ReportAllocs()
	for b.Loop() {
		c := pipeline.Acquire(st.next(), &resp)
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
