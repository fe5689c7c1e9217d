package route

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

func withCtx(uri string, f func(c *pipeline.Ctx)) *fasthttp.Response {
	var req fasthttp.Request
	resp := &fasthttp.Response{}
	req.SetRequestURI(uri)
	req.Header.SetHost("api.example.com")
	c := pipeline.AcquireParsed(&req, resp)
	defer pipeline.Release(c)
	f(c)
	return resp
}

// upstreamTarget is the request target the forwarding step will send.
func upstreamTarget(c *pipeline.Ctx) string {
	p := c.Target.Path
	if c.UpstreamPath != nil {
		p = c.UpstreamPath
	}
	if c.Target.HasQuery {
		return string(p) + "?" + string(c.Target.Query)
	}
	return string(p)
}

// TestRewriteNeverDecodesTwice: a rewrite works on the canonical, still
// encoded path, and what it produces must itself be canonical, so an
// escaped dot or slash can never become a real one on the way upstream.
func TestRewriteNeverDecodesTwice(t *testing.T) {
	for _, tc := range []struct {
		spec     RewriteSpec
		in, want string // want "" = refused
	}{
		{RewriteSpec{StripPrefix: "/api/order", AddPrefix: "/v1/"}, "/api/order/a%2Fb", "/v1/a%2Fb"},
		{RewriteSpec{StripPrefix: "/api/order", AddPrefix: "/v1/"}, "/api/order/x%252e%252e", "/v1/x%252e%252e"},
		{RewriteSpec{Regex: `^/orders/(.*)$`, Replace: "/o/$1"}, "/orders/a%2Fb%3Fc", "/o/a%2Fb%3Fc"},
		// A cut inside a segment that leaves a dot segment is refused,
		// not normalized away by the backend.
		{RewriteSpec{StripPrefix: "/a"}, "/a../x", ""},
		{RewriteSpec{Regex: `^/x/(.*)$`, Replace: "/y/$1/.."}, "/x/z", ""},
		{RewriteSpec{Regex: `^/x(.*)$`, Replace: "/y/.$1"}, "/x./z", ""},
	} {
		rw, err := NewRewrite(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		resp := withCtx(tc.in, func(c *pipeline.Ctx) {
			if rw.Handle(c) == pipeline.Continue {
				got = upstreamTarget(c)
			}
		})
		if got != tc.want {
			t.Errorf("%+v on %s: got %q (status %d), want %q", tc.spec, tc.in, got, resp.StatusCode(), tc.want)
		}
		if tc.want == "" && resp.StatusCode() != 400 {
			t.Errorf("%+v on %s: status %d, want 400", tc.spec, tc.in, resp.StatusCode())
		}
	}
}

func TestRewrite(t *testing.T) {
	for _, tc := range []struct {
		spec     RewriteSpec
		in, want string
	}{
		{RewriteSpec{Path: "/pay/do"}, "/gateway?x=1", "/pay/do?x=1"},
		{RewriteSpec{StripPrefix: "/api"}, "/api/order/1", "/order/1"},
		{RewriteSpec{StripPrefix: "/api"}, "/api", "/"},
		{RewriteSpec{StripPrefix: "/api", AddPrefix: "/internal"}, "/api/order/1?q", "/internal/order/1?q"},
		{RewriteSpec{StripPrefix: "/api/", AddPrefix: "/internal/"}, "/api/order", "/internal/order"},
		{RewriteSpec{AddPrefix: "/v2"}, "/order", "/v2/order"},
		{RewriteSpec{StripPrefix: "/api"}, "/other", "/other"}, // prefix absent: unchanged
		{RewriteSpec{Regex: `^/users/(\d+)/orders$`, Replace: "/orders/by-user/$1"}, "/users/42/orders", "/orders/by-user/42"},
		{RewriteSpec{Regex: `^/u/(?P<id>\d+)$`, Replace: "/user/${id}/profile"}, "/u/7", "/user/7/profile"},
		{RewriteSpec{Regex: `^/u/(\d+)$`, Replace: "/x/$1"}, "/nomatch", "/nomatch"},
	} {
		rw, err := NewRewrite(tc.spec)
		if err != nil {
			t.Fatalf("%+v: %v", tc.spec, err)
		}
		var got string
		withCtx(tc.in, func(c *pipeline.Ctx) {
			rw.Handle(c)
			got = upstreamTarget(c)
		})
		if got != tc.want {
			t.Errorf("%+v on %s: got %s, want %s", tc.spec, tc.in, got, tc.want)
		}
	}
	rw, _ := NewRewrite(RewriteSpec{Host: "orders.internal"})
	withCtx("/a", func(c *pipeline.Ctx) {
		rw.Handle(c)
		if string(c.UpstreamHost) != "orders.internal" {
			t.Errorf("host %s", c.UpstreamHost)
		}
	})
	for _, bad := range []RewriteSpec{{}, {Path: "x"}, {Path: "/a", StripPrefix: "/b"}, {Regex: "("}, {Regex: "a", Replace: "x"}, {Replace: "/x"}} {
		if _, err := NewRewrite(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestOfflineAndDeprecation(t *testing.T) {
	off, err := NewOffline("/v1/", "/v2/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp := withCtx("/v1/order/7?a=b", off.Serve)
	if resp.StatusCode() != 308 || string(resp.Header.Peek("Location")) != "/v2/order/7?a=b" {
		t.Fatalf("offline: %d %s", resp.StatusCode(), resp.Header.Peek("Location"))
	}
	gone, _ := NewOffline("", "", &pipeline.Static{Status: 410, Body: []byte(`{"code":410}`)})
	if resp := withCtx("/v1/x", gone.Serve); resp.StatusCode() != 410 {
		t.Fatalf("offline answer: %d", resp.StatusCode())
	}
	if _, err := NewOffline("/v1/", "", nil); err == nil {
		t.Fatal("offline without successor or answer accepted")
	}
	dep, err := NewDeprecation("2026-06-01", "2027-06-01", "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	resp = withCtx("/v1/x", func(c *pipeline.Ctx) { c.Resp.SetStatusCode(500); dep.HandleResponse(c) })
	if string(resp.Header.Peek("Deprecation")) != "@1780272000" || string(resp.Header.Peek("Sunset")) != "Tue, 01 Jun 2027 00:00:00 GMT" {
		t.Fatalf("headers: %s", resp.Header.String())
	}
	if _, err := NewDeprecation("June", "", ""); err == nil {
		t.Fatal("bad date accepted")
	}
}

func TestMockPicks(t *testing.T) {
	a := &pipeline.Static{Status: 200, Body: []byte("a")}
	b := &pipeline.Static{Status: 201, Body: []byte("b")}
	m, err := NewMock("round_robin", []MockAnswer{{Answer: a}, {Answer: b, Delay: 30 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	var got string
	start := time.Now()
	for range 4 {
		got += string(withCtx("/", m.Serve).Body())
	}
	if got != "abab" {
		t.Fatalf("round robin gave %s", got)
	}
	if time.Since(start) < 60*time.Millisecond {
		t.Fatal("delay not applied")
	}
	first, _ := NewMock("", []MockAnswer{{Answer: a}, {Answer: b}})
	if string(withCtx("/", first.Serve).Body()) != "a" {
		t.Fatal("first")
	}
	if _, err := NewMock("sometimes", []MockAnswer{{Answer: a}}); err == nil {
		t.Fatal("bad pick accepted")
	}
}
