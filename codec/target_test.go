package codec

import (
	"bufio"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/testutil"

	"github.com/valyala/fasthttp"
)

func TestCanonicalPath(t *testing.T) {
	ok := []struct{ in, want string }{
		{"/", "/"},
		{"/a/b", "/a/b"},
		{"/a/b/", "/a/b/"},
		{"//a///b//", "/a/b/"},
		{"/a/./b", "/a/b"},
		{"/a/b/.", "/a/b/"},
		{"/a/b/..", "/a/"},
		{"/a/b/../c", "/a/c"},
		{"/../../a", "/a"},
		{"/..", "/"},
		{"/%2e%2E/a", "/a"},
		{"/a/%2e/b", "/a/b"},
		{"/%7Euser/%41%62", "/~user/Ab"},
		{"/a%2fb", "/a%2Fb"},
		{"/a%2Fb%3F%23%25", "/a%2Fb%3F%23%25"},
		{"/x%252fy", "/x%252fy"},
		{"/a;b=c/d", "/a;b=c/d"},
		{"/!$&'()*+,;=:@", "/!$&'()*+,;=:@"},
		{"/caf\xc3\xa9", "/caf%C3%A9"},
		{`/a"b{c}|d^e` + "`", "/a%22b%7Bc%7D%7Cd%5Ee%60"},
		{"/a..b/c.", "/a..b/c."},
		{"/...", "/..."},
		{"/%2e%2e%2e", "/..."},
		{"/a%2Fb%2Fc", "/a%2Fb%2Fc"},
	}
	for _, c := range ok {
		got, err := AppendCanonicalPath(nil, []byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("%q → %q, %v; want %q", c.in, got, err, c.want)
			continue
		}
		again, err := AppendCanonicalPath(nil, got)
		if err != nil || string(again) != string(got) {
			t.Errorf("%q is not a fixed point: %q, %v", got, again, err)
		}
	}
	bad := []string{
		"", "a/b", "/%", "/%2", "/%zz", "/a%g0",
		"/%00", "/a%0d%0aX:1", "/%7f",
		"/..;/admin", "/a/.;x/b", "/a/..;jsessionid=1",
		"/%252e%252e/admin", "/%252E/x", "/api/order/%252e%252e/%252e%252e/v1/order/create",
		"/orders/..%252f..%252fadmin", "/a/..%2Fadmin", "/a/..%2f..%2fadmin",
		`/a/..\admin`, "/a/..%5Cadmin", "/a/%2e%2e%5c",
		"/a/%25252525252e", "/%2e%2e;x",
	}
	for _, in := range bad {
		if got, err := AppendCanonicalPath(nil, []byte(in)); !errors.Is(err, ErrBadPath) {
			t.Errorf("%q → %q, %v; want ErrBadPath", in, got, err)
		}
	}
}

func TestValidHost(t *testing.T) {
	for _, h := range []string{"api.example.com", "API.example.com:8080", "127.0.0.1", "127.0.0.1:1", "[::1]", "[::1]:443", "a_b.internal", "x:65535"} {
		if !ValidHost([]byte(h)) {
			t.Errorf("%q refused", h)
		}
	}
	for _, h := range []string{"", "api.example.com:1@internal.local", "user@host", "a{b}", "a b", "h:", "h:65536", "h:1:2",
		"[::1", "[fe80::1%25eth0]", "[1.2.3.4]", "%61pi", "a/b", "a\\b", "h:+1"} {
		if ValidHost([]byte(h)) {
			t.Errorf("%q accepted", h)
		}
	}
}

func TestParseTarget(t *testing.T) {
	cases := []struct {
		raw               string
		path, query, host string
		err               error
		hasQuery          bool
	}{
		{raw: "GET /a/../b?x=%zz;y HTTP/1.1\r\nHost: h\r\n\r\n", path: "/b", query: "x=%zz;y", host: "h", hasQuery: true},
		{raw: "GET /a? HTTP/1.1\r\nHost: h:81\r\n\r\n", path: "/a", query: "", host: "h:81", hasQuery: true},
		{raw: "GET http://other.example/x/y?q HTTP/1.1\r\nHost: h\r\n\r\n", path: "/x/y", query: "q", host: "other.example", hasQuery: true},
		{raw: "GET http://other.example HTTP/1.1\r\nHost: h\r\n\r\n", path: "/", host: "other.example"},
		{raw: "GET http://other.example?a=1 HTTP/1.1\r\nHost: h\r\n\r\n", path: "/", query: "a=1", host: "other.example", hasQuery: true},
		{raw: "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", path: "*", host: "h"},
		{raw: "GET http:///x HTTP/1.1\r\nHost: h\r\n\r\n", err: ErrBadTarget},
		{raw: "GET https://h/x HTTP/1.1\r\nHost: h\r\n\r\n", err: ErrBadTarget},
		{raw: "GET http://u@h/x HTTP/1.1\r\nHost: h\r\n\r\n", err: ErrBadHost},
		{raw: "GET /x#frag HTTP/1.1\r\nHost: h\r\n\r\n", err: ErrBadTarget},
		{raw: "GET /x HTTP/1.0\r\n\r\n", err: ErrMissingHost},
		{raw: "GET /x HTTP/1.1\r\nHost: api.example.com:1@internal.local\r\n\r\n", err: ErrBadHost},
		{raw: "GET /x HTTP/1.1\r\nHost: {a}\r\n\r\n", err: ErrBadHost},
		{raw: "GET /%2e%2e;/x HTTP/1.1\r\nHost: h\r\n\r\n", err: ErrBadPath},
	}
	for _, c := range cases {
		var h fasthttp.RequestHeader
		if err := h.Read(bufioReader(c.raw)); err != nil {
			t.Fatalf("%q: %v", c.raw, err)
		}
		var tg Target
		err := ParseTarget(&tg, &h)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("%q: err %v, want %v", c.raw, err, c.err)
			}
			continue
		}
		if err != nil || string(tg.Path) != c.path || string(tg.Query) != c.query || string(tg.Host) != c.host || tg.HasQuery != c.hasQuery {
			t.Errorf("%q: path %q query %q (%v) host %q err %v", c.raw, tg.Path, tg.Query, tg.HasQuery, tg.Host, err)
		}
	}
}

// TestForwardPathKeepsTheClientsSpelling: a path that differs from its
// canonical form only in how escapes are spelled goes upstream as sent;
// one whose meaning canonicalization changed goes in canonical form.
func TestForwardPathKeepsTheClientsSpelling(t *testing.T) {
	for raw, want := range map[string]string{
		// Spelled differently, meaning the same: the client's bytes.
		"/a/%7euser":       "/a/%7euser",
		"/a/%7Euser":       "/a/%7Euser",
		"/a/caf%C3%A9":     "/a/caf%C3%A9",
		"/a/caf%c3%a9":     "/a/caf%c3%a9",
		"/a%2fb/%41%2e":    "/a%2fb/%41%2e",
		"/x;p=1/%3B,@:!$&": "/x;p=1/%3B,@:!$&",
		"/%2e%2e%2e":       "/%2e%2e%2e",
		// Changed by canonicalization: the canonical form.
		"/a/%2e%2e/b":    "/b",
		"/a/%2E/b":       "/a/b",
		"/a/./b":         "/a/b",
		"/a/../b":        "/b",
		"//a//b":         "/a/b",
		"/a/":            "/a/",
		"/a/b/..":        "/a/",
		"/a\\b":          "/a%5Cb",
		"/a/caf\xc3\xa9": "/a/caf%C3%A9",
		"/a/{b}\"":       "/a/%7Bb%7D%22",
		"http://h/%7ex":  "/%7ex",
		"http://h":       "/",
	} {
		var h fasthttp.RequestHeader
		if err := h.Read(bufioReader("GET " + raw + " HTTP/1.1\r\nHost: h\r\n\r\n")); err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		var tg Target
		if err := ParseTarget(&tg, &h); err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		if got := string(tg.ForwardPath()); got != want {
			t.Errorf("%q: forwarded as %q, want %q (canonical %q)", raw, got, want, tg.Path)
		}
	}
}

func TestParseTargetAllocs(t *testing.T) {
	if testutil.Race {
		t.Skip("the race detector allocates; make test runs allocation gates without it")
	}
	// Canonicalized, and kept as sent.
	for _, target := range []string{"/api/v1/%7Eorders/./42/../43?x=1&y=%2F", "/api/v1/%7eorders/caf%c3%a9?x=1"} {
		var h fasthttp.RequestHeader
		if err := h.Read(bufioReader("GET " + target + " HTTP/1.1\r\nHost: api.example.com\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		var tg Target
		_ = ParseTarget(&tg, &h)
		if n := testing.AllocsPerRun(100, func() { _ = ParseTarget(&tg, &h) }); n != 0 {
			t.Fatalf("ParseTarget(%s) allocates %v times", target, n)
		}
	}
}

func BenchmarkParseTarget(b *testing.B) {
	var h fasthttp.RequestHeader
	if err := h.Read(bufioReader("GET /api/v1/orders/42/items?x=1&y=%2F HTTP/1.1\r\nHost: api.example.com\r\n\r\n")); err != nil {
		b.Fatal(err)
	}
	var tg Target
	b.ReportAllocs()
	for b.Loop() {
		_ = ParseTarget(&tg, &h)
	}
}

func bufioReader(s string) *bufio.Reader { return bufio.NewReader(strings.NewReader(s)) }

// FuzzCanonicalPath: whatever comes in, what comes out is its own
// canonical form, and no segment of it is, or decodes to, a dot segment.
func FuzzCanonicalPath(f *testing.F) {
	for _, s := range []string{"/a/%7euser", "/caf%c3%a9", "/a/../b", "/%2e%2E/x", "//a//b/", "/a%2Fb", "/..;/x", "/%252e", "/a\\b", "/caf\xc3\xa9", "/\x00", "/a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		out, err := AppendCanonicalPath(nil, []byte(p))
		if err != nil {
			return
		}
		again, err := AppendCanonicalPath(nil, out)
		if err != nil || string(again) != string(out) {
			t.Fatalf("%q → %q → %q, %v", p, out, again, err)
		}
		for _, seg := range strings.Split(string(out), "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("%q → %q keeps a dot segment", p, out)
			}
		}
		if strings.Contains(string(out), "//") {
			t.Fatalf("%q → %q keeps an empty segment", p, out)
		}
		// A path forwarded as sent reads, to a backend that decodes it,
		// exactly as the canonical one the gateway routed on.
		if SameMeaning([]byte(p), out) {
			dp, err1 := url.PathUnescape(p)
			dc, err2 := url.PathUnescape(string(out))
			if err1 != nil || err2 != nil || dp != dc {
				t.Fatalf("%q forwarded as sent decodes to %q, canonical %q to %q", p, dp, out, dc)
			}
		}
	})
}
