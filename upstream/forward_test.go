package upstream

import (
	"bufio"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

func serve(t *testing.T, svc *Service, method, uri string) (*pipeline.Ctx, *fasthttp.Response) {
	t.Helper()
	req := &fasthttp.Request{}
	resp := &fasthttp.Response{}
	req.Header.SetMethod(method)
	req.SetRequestURI(uri)
	req.Header.SetHost("api.example.com")
	c := &pipeline.Ctx{Req: req, Resp: resp, Start: time.Now(),
		Peer: netip.MustParseAddrPort("203.0.113.7:5555"), ClientIP: netip.MustParseAddr("203.0.113.7")}
	_ = codec.ParseTarget(&c.Target, &req.Header)
	c.Trace.FillHex()
	c.Trace.SetRequestID([]byte("rid-1"))
	proxy(c, svc)
	return c, resp
}

// proxy runs a forwarding chain: the edge filter, then the service.
func proxy(c *pipeline.Ctx, svc *Service) {
	pipeline.NewChain(svc, &Forwarding{Edge: &Edge{Internal: defaultInternal()}}).Run(c)
}

func defaultInternal() (in codec.Internal) {
	in.HeaderPrefixes = []string{"X-Internal-"}
	in.QueryPrefixes = []string{"internal_"}
	return in
}

func newService(t *testing.T, cfg ServiceConfig, p Pool, addrs ...string) *Service {
	t.Helper()
	st := pipeline.NewState(time.Second).Begin()
	var ins []*Instance
	for _, a := range addrs {
		ins = append(ins, SharedInstance(st, a, 1, p, Health{}, nil))
	}
	svc, err := NewService(cfg, ins)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func TestForwardHeaders(t *testing.T) {
	up := testutil.StartUpstream(t, "one")
	svc := newService(t, ServiceConfig{Name: "s"}, Pool{}, up.Addr)
	// Parsed from the wire, as a transport hands it over.
	req := &fasthttp.Request{}
	resp := &fasthttp.Response{}
	// X-Early comes before the Connection field that names it (in
	// another case); X-Hop after.
	raw := "GET /a/b?x=1&internal_role=admin&y=2 HTTP/1.1\r\nHost: api.example.com\r\nx-early: named later\r\n" +
		"Connection: keep-alive, X-Hop, X-EARLY\r\nX-Hop: must go\r\nKeep-Alive: timeout=5\r\n" +
		"X-Internal-User: root\r\nx-internal-token: t\r\nX-Forwarded-For: 1.2.3.4\r\nX-Keep: yes\r\n\r\n"
	if err := req.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	c := &pipeline.Ctx{Req: req, Resp: resp, Start: time.Now(),
		Peer: netip.MustParseAddrPort("203.0.113.7:5555"), ClientIP: netip.MustParseAddr("203.0.113.7")}
	_ = codec.ParseTarget(&c.Target, &req.Header)
	c.Trace.TraceID = [16]byte{1}
	c.Trace.SpanID = [8]byte{2}
	c.Trace.FillHex()
	c.Trace.SetRequestID([]byte("rid-1"))
	proxy(c, svc)
	if resp.StatusCode() != 200 || string(resp.Body()) != "one" {
		t.Fatalf("status %d body %q", resp.StatusCode(), resp.Body())
	}
	got := up.Last()
	for _, k := range []string{"Connection", "X-Hop", "X-Early", "Keep-Alive", "X-Internal-User", "x-internal-token"} {
		if v := got.Header(k); v != "" {
			t.Errorf("%s forwarded: %q", k, v)
		}
	}
	want := map[string]string{
		"X-Forwarded-For":   "203.0.113.7", // untrusted peer: its XFF is replaced
		"X-Real-IP":         "203.0.113.7",
		"X-Forwarded-Proto": "http",
		"X-Forwarded-Host":  "api.example.com",
		"X-Keep":            "yes",
		"X-Request-Id":      "rid-1",
		"traceparent":       "00-01000000000000000000000000000000-0200000000000000-00",
	}
	for k, v := range want {
		if got.Header(k) != v {
			t.Errorf("%s = %q, want %q", k, got.Header(k), v)
		}
	}
	if got.URI != "/a/b?x=1&y=2" {
		t.Errorf("upstream URI %q: internal_ parameter not stripped", got.URI)
	}
	// The upstream request was written from c.Fields alone: c.Req is still
	// the client's, for what reads it after the exchange (the access log,
	// a mirror's copy, a recording).
	if u := string(req.Header.RequestURI()); u != "/a/b?x=1&internal_role=admin&y=2" {
		t.Errorf("the client's request target became %q", u)
	}
	if v := string(req.Header.Peek("X-Internal-User")); v != "root" || string(req.Header.Peek("X-Forwarded-For")) != "1.2.3.4" {
		t.Errorf("the client's header section was rewritten: X-Internal-User %q, X-Forwarded-For %q",
			v, req.Header.Peek("X-Forwarded-For"))
	}
}

func TestForwardRefusedRetriesGETElsewhere(t *testing.T) {
	up := testutil.StartUpstream(t, "alive")
	dead := testutil.FreeAddr(t)
	svc := newService(t, ServiceConfig{Name: "s", Retry: 1}, Pool{}, dead, up.Addr)
	for i := range 6 {
		c, resp := serve(t, svc, "GET", "/x")
		if resp.StatusCode() != 200 {
			t.Fatalf("GET %d: status %d (%s), want 200 after retry", i, resp.StatusCode(), resp.Body())
		}
		if c.Outcome.Instance != up.Addr {
			t.Fatalf("answered by %s", c.Outcome.Instance)
		}
		if c.Outcome.Result != pipeline.ResultOK || c.Outcome.Status != 200 {
			t.Fatalf("outcome %+v", c.Outcome)
		}
	}
}

// TestForwardRetryWithNowhereToGo: a GET refused by the only instance
// may be retried, but there is nowhere else to go; the client gets the
// failed try's 502, not the empty 200 the answer was reset to before
// the retry was known to have an instance.
func TestForwardRetryWithNowhereToGo(t *testing.T) {
	svc := newService(t, ServiceConfig{Name: "s", Retry: 1}, Pool{}, testutil.FreeAddr(t))
	c, resp := serve(t, svc, "GET", "/x")
	if resp.StatusCode() != 502 || !hasCode(resp.Body()) || c.Outcome.Attempts != 1 {
		t.Fatalf("status %d (%q) after %d attempts, want the 502 of the one try", resp.StatusCode(), resp.Body(), c.Outcome.Attempts)
	}
}

func hasCode(body []byte) bool { return strings.Contains(string(body), `"code":502`) }

func TestForwardRefusedPOSTNotRetried(t *testing.T) {
	up := testutil.StartUpstream(t, "alive")
	dead := testutil.FreeAddr(t)
	// Round robin starts at the dead instance.
	svc := newService(t, ServiceConfig{Name: "s", Retry: 1}, Pool{}, dead, up.Addr)
	c, resp := serve(t, svc, "POST", "/x")
	if resp.StatusCode() != 502 || c.Outcome.Attempts != 1 {
		t.Fatalf("POST to refusing instance: status %d attempts %d, want 502 after 1", resp.StatusCode(), c.Outcome.Attempts)
	}
	if up.Requests.Load() != 0 {
		t.Fatal("POST was retried on another instance")
	}
	if c.Outcome.Result != pipeline.ResultRefused {
		t.Fatalf("outcome %+v, want refused", c.Outcome)
	}
}

func TestForwardTimeout504(t *testing.T) {
	up := testutil.StartUpstream(t, "slow")
	up.Delay.Store(int64(2 * time.Second))
	svc := newService(t, ServiceConfig{Name: "s", Total: 3 * time.Second, Retry: 1}, Pool{Read: 300 * time.Millisecond}, up.Addr)
	start := time.Now()
	c, resp := serve(t, svc, "GET", "/slow")
	took := time.Since(start)
	if resp.StatusCode() != 504 {
		t.Fatalf("status %d, want 504", resp.StatusCode())
	}
	if took < 250*time.Millisecond || took > time.Second {
		t.Fatalf("504 after %v, want about the 300ms read timeout", took)
	}
	if c.Outcome.Attempts != 1 {
		t.Fatalf("a timeout was retried (%d attempts)", c.Outcome.Attempts)
	}
	if c.Outcome.Result != pipeline.ResultTimeout || !c.Outcome.Result.UpstreamFailure() {
		t.Fatalf("outcome %+v, want a timeout", c.Outcome)
	}
}

func TestForwardNoInstance503(t *testing.T) {
	in := &Instance{Addr: "127.0.0.1:1"}
	in.SetDisabled(true)
	svc, err := NewService(ServiceConfig{Name: "s"}, []*Instance{in})
	if err != nil {
		t.Fatal(err)
	}
	_, resp := serve(t, svc, "GET", "/")
	if resp.StatusCode() != 503 {
		t.Fatalf("status %d, want 503", resp.StatusCode())
	}
}
