package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/auth/jwt"
	"github.com/tollgate/tollgate/record"
	"github.com/tollgate/tollgate/sign"
	"github.com/valyala/fasthttp"
)

const (
	appKey    = "demo-app"
	appSecret = "demo-secret-0123456789"
	jwtSecret = "jwt-secret-0123456789abcdef0123456789"
)

// target is the environment a test replays against: a real server that
// checks signatures (and nonces) and tokens as the gateway would.
type target struct {
	addr     string
	price    atomic.Int64 // what /items answers as its price
	payCode  atomic.Int64 // what /pay answers
	mu       sync.Mutex
	nonces   map[string]bool
	refused  atomic.Int64
	requests atomic.Int64
	hosts    sync.Map
}

func startTarget(t *testing.T) *target {
	t.Helper()
	tg := &target{nonces: map[string]bool{}}
	tg.price.Store(10)
	tg.payCode.Store(200)
	verifier, err := jwt.New(jwt.Config{Keys: []jwt.Key{{Secret: []byte(jwtSecret)}}, Issuer: "id.test"})
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		tg.requests.Add(1)
		tg.hosts.Store(string(ctx.Host()), true)
		ctx.SetContentType("application/json")
		ts := time.Now().UnixNano()
		switch string(ctx.Path()) {
		case "/items":
			ctx.SetBodyString(`{"id":"` + string(ctx.QueryArgs().Peek("id")) + `","price":` + itoa(tg.price.Load()) + `,"ts":` + itoa(ts) + `}`)
		case "/pay":
			h := &ctx.Request.Header
			want, err := sign.Sign(appSecret, string(ctx.QueryArgs().QueryString()), string(ctx.PostBody()),
				string(h.Peek(sign.HeaderTimestamp)), string(h.Peek(sign.HeaderNonce)))
			nonce := string(h.Peek(sign.HeaderNonce))
			tg.mu.Lock()
			replayed := tg.nonces[nonce]
			tg.nonces[nonce] = true
			tg.mu.Unlock()
			if err != nil || want != string(h.Peek(sign.HeaderSign)) || replayed || string(h.Peek(sign.HeaderAppKey)) != appKey {
				tg.refused.Add(1)
				ctx.SetStatusCode(401)
				ctx.SetBodyString(`{"code":401}`)
				return
			}
			ctx.SetStatusCode(int(tg.payCode.Load()))
			ctx.SetBodyString(`{"paid":"` + string(ctx.PostArgs().Peek("amount")) + `"}`)
		case "/me":
			tok, _ := bytes.CutPrefix(ctx.Request.Header.Peek("Authorization"), []byte("Bearer "))
			cl, err := verifier.Verify(tok)
			if err != nil {
				tg.refused.Add(1)
				ctx.SetStatusCode(401)
				return
			}
			ctx.SetBodyString(`{"sub":"` + cl.Subject + `"}`)
		default:
			ctx.SetContentType("text/plain")
			ctx.SetBodyString("plain " + string(ctx.Path()))
		}
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { _ = srv.Shutdown() })
	tg.addr = ln.Addr().String()
	return tg
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// recording writes entries as a recording file.
func recording(t *testing.T, entries ...record.Entry) string {
	t.Helper()
	var buf bytes.Buffer
	for _, e := range entries {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(append(b, '\n'))
	}
	p := filepath.Join(t.TempDir(), "record-1.jsonl")
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

var t0 = time.Unix(1700000000, 0)

func items(id string, price int) record.Entry {
	return record.Entry{Time: t0, Route: "items", Method: "GET", Host: "api.test", Target: "/items?id=" + id,
		ReqHeaders: [][2]string{{"Host", "api.test"}, {"Authorization", "Bearer ***"}}, Status: 200,
		RespHeaders: [][2]string{{"Content-Type", "application/json"}},
		RespBody:    `{"id":"` + id + `","price":` + itoa(int64(price)) + `,"ts":1}`, LatencyUS: 900}
}

func pay(amount string) record.Entry {
	return record.Entry{Time: t0, Route: "pay", Consumer: appKey, Method: "POST", Host: "api.test", Target: "/pay?cmd=1",
		ReqHeaders: [][2]string{{"Host", "api.test"}, {"X-App-Key", appKey}, {"X-Timestamp", "1700000000"},
			{"X-Nonce", "abc"}, {"X-Sign", "***"}, {"Content-Type", "application/x-www-form-urlencoded"}},
		ReqBody: "amount=" + amount + "&card_no=***", Status: 200,
		RespHeaders: [][2]string{{"Content-Type", "application/json"}}, RespBody: `{"paid":"` + amount + `"}`, LatencyUS: 2000}
}

func run(t *testing.T, o Options) (*Summary, []Result) {
	t.Helper()
	var diffs bytes.Buffer
	o.Diffs = &diffs
	if o.Rate == 0 {
		o.Rate = -1
	}
	s, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var out []Result
	for _, line := range strings.Split(strings.TrimSpace(diffs.String()), "\n") {
		if line == "" {
			continue
		}
		var r Result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return s, out
}

func TestReplayFindsExactlyTheDifferences(t *testing.T) {
	tg := startTarget(t)
	file := recording(t, items("1", 10), pay("5"), items("2", 10), pay("7"),
		record.Entry{Time: t0, Route: "plain", Method: "GET", Host: "api.test", Target: "/plain", Status: 200, RespBody: "plain /plain"})
	ignore, _ := record.ParseIgnores([]string{"json.ts"})
	opts := Options{Files: []string{file}, Target: "http://" + tg.addr, Ignore: ignore,
		Signers: []Signer{{AppKey: appKey, Secret: appSecret}}}

	s, diffs := run(t, opts)
	if s.Sent != 5 || s.Matched != 5 || s.Differing != 0 || s.Errors != 0 || len(diffs) != 0 || s.Resigned != 2 || s.Withheld != 2 {
		t.Fatalf("the same answers: %+v %v", s, diffs)
	}
	if tg.refused.Load() != 0 {
		t.Fatal("a re-signed request was refused")
	}
	if _, ok := tg.hosts.Load("api.test"); !ok {
		t.Fatal("the recorded Host was not sent")
	}

	// The new release prices items differently and answers payments 202:
	// exactly those show, and a second run's fresh nonces pass too.
	tg.price.Store(12)
	tg.payCode.Store(202)
	s, diffs = run(t, opts)
	if s.Matched != 1 || s.Differing != 4 || s.ByKind["body"] != 2 || s.ByKind["status"] != 2 || s.ByKind["header"] != 0 || s.Errors != 0 {
		t.Fatalf("summary %+v", s)
	}
	for _, d := range diffs {
		want := map[string]string{"items": "body json.price 10 12", "pay": "status  200 202"}[d.Route]
		if len(d.Differences) != 1 || strings.Join(d.Kinds, ",") != strings.Fields(want)[0] ||
			d.Differences[0].Kind+" "+d.Differences[0].Where+" "+d.Differences[0].Want+" "+d.Differences[0].Got != want {
			t.Errorf("%s: %+v, want %s", d.Route, d, want)
		}
	}
	places := strings.Join(s.Places(10), "\n")
	if !strings.Contains(places, "2  body    json.price") || !strings.Contains(places, "2  status  200 → 202") {
		t.Fatalf("places:\n%s", places)
	}
	if tg.refused.Load() != 0 {
		t.Fatal("a second replay's signatures or nonces were refused")
	}
	if !s.Exceeds(3) || s.Exceeds(4) {
		t.Fatal("Exceeds")
	}
	var out bytes.Buffer
	s.Print(&out, "http://x", time.Second)
	for _, want := range []string{"matched           1", "differing         4   status 2, header 0, body 2", "latency     recorded p50"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

func TestReplayCredentialsHeadersAndErrors(t *testing.T) {
	tg := startTarget(t)
	me := record.Entry{Time: t0, Route: "me", Consumer: "jwt:user-7", Method: "GET", Host: "api.test", Target: "/me",
		ReqHeaders: [][2]string{{"Authorization", "Bearer ***"}}, Status: 200, RespBody: `{"sub":"user-7"}`,
		RespHeaders: [][2]string{{"X-Version", "1"}}}
	cut := items("3", 12)
	cut.Method, cut.ReqBody, cut.ReqBodyCut = "POST", "xxxx", true
	masked := items("4", 12)
	masked.RespBody = `{"id":"***","price":12,"ts":"***"}`
	file := recording(t, me, cut, masked)

	// Without a JWT secret the token cannot be replaced: the target
	// refuses, and the summary says why.
	s, _ := run(t, Options{Files: []string{file}, Target: "http://" + tg.addr})
	if s.Withheld != 2 || s.ByKind["status"] != 1 || s.Skipped != 1 || s.SkippedWhy["request body not recorded whole"] != 1 {
		t.Fatalf("without credentials: %+v", s)
	}
	tg.price.Store(12)
	s, diffs := run(t, Options{Files: []string{file}, Target: "http://" + tg.addr, CompareHeaders: []string{"X-Version"},
		JWT: &JWTIssuer{Secret: []byte(jwtSecret), Issuer: "id.test"}})
	// A masked value matches anything; X-Version is missing from the
	// target's answer.
	if s.Reissued != 1 || s.Matched != 1 || s.Differing != 1 || s.ByKind["header"] != 1 || len(diffs) != 1 ||
		diffs[0].Differences[0].Where != "X-Version" || diffs[0].Differences[0].Got != record.Absent {
		t.Fatalf("with a token: %+v %+v", s, diffs)
	}

	dead := "127.0.0.1:1"
	s, diffs = run(t, Options{Files: []string{file}, Target: "http://" + dead, Timeout: time.Second})
	if s.Errors != 2 || len(diffs) != 2 || diffs[0].Kinds[0] != "error" || !strings.Contains(strings.Join(s.Places(5), ""), "error") {
		t.Fatalf("target down: %+v %+v", s, diffs)
	}
}

func TestReplayPace(t *testing.T) {
	tg := startTarget(t)
	a, b := items("1", 10), items("2", 10)
	b.Time = t0.Add(300 * time.Millisecond)
	file := recording(t, a, b)
	start := time.Now()
	if _, err := Run(context.Background(), Options{Files: []string{file}, Target: "http://" + tg.addr}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("the recorded pace took %v, want the 300ms between the records", took)
	}
	file = recording(t, a, a, a, a, a, a)
	start = time.Now()
	if _, err := Run(context.Background(), Options{Files: []string{file}, Target: "http://" + tg.addr, Rate: 20}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Fatalf("6 requests at 20/s took %v", took)
	}
}

func TestReplayOptionsErrors(t *testing.T) {
	for _, target := range []string{"", "ftp://x", "http://", "http://h:1/prefix"} {
		if _, err := Run(context.Background(), Options{Target: target}); err == nil {
			t.Errorf("target %q accepted", target)
		}
	}
}

func TestJWTIssuerTokensVerify(t *testing.T) {
	v, err := jwt.New(jwt.Config{Keys: []jwt.Key{{KID: "k2", Secret: []byte(jwtSecret)}}, Issuer: "id.test", Audience: "api"})
	if err != nil {
		t.Fatal(err)
	}
	j := &JWTIssuer{Secret: []byte(jwtSecret), KID: "k2", Issuer: "id.test", Audience: "api"}
	tok, err := j.Token("user-7", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cl, err := v.Verify([]byte(tok))
	if err != nil || cl.Subject != "user-7" || cl.ID == "" || time.Until(cl.Expires) < 4*time.Minute {
		t.Fatalf("claims %+v, %v", cl, err)
	}
	other, _ := j.Token("user-7", time.Now())
	if other == tok {
		t.Fatal("two tokens alike: the jti must differ")
	}
}
