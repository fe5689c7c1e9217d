package server_test

import (
	"bufio"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/valyala/fasthttp"
)

// Regression tests for what an attacker tried at the edge, each as raw
// bytes over a socket to a gateway whose upstream records the exact bytes
// it is sent.

// exchange sends raw and returns the status of the one answer and what the
// upstream received for it (ok=false when nothing reached it).
func exchange(t *testing.T, g *gatewaytest.Gateway, up *testutil.RecordingUpstream, raw string) (status int, body string, got testutil.RawRequest, ok bool) {
	t.Helper()
	before := up.Count()
	conn, err := net.DialTimeout("tcp", g.Addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := conn.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	var resp fasthttp.Response
	resp.SkipBody = strings.HasPrefix(raw, "HEAD ")
	if err := resp.Read(bufio.NewReader(conn)); err != nil {
		t.Fatalf("%q: no answer: %v", raw, err)
	}
	status, body = resp.StatusCode(), string(resp.Body())
	if up.Count() > before {
		got, ok = up.Last()
	}
	return status, body, got, ok
}

const escapeRoutes = `
services:
  up: {instances: [{addr: "${UP}"}]}
routes:
  - name: order-create
    match: {path: /v1/order/create}
    auth: signature
    service: up
  - name: admin
    match: {prefix: /admin}
    auth: signature
    service: up
  - name: public-orders
    match: {prefix: /api/order/}
    rewrite: {strip_prefix: /api/order, add_prefix: /v1/order}
    service: up
  - name: public-regex
    match: {prefix: /orders/}
    rewrite: {regex: '^/orders/(.*)$', replace: '/o/$1'}
    service: up
  - name: offline
    match: {prefix: /old/}
    offline: {successor: /new/}
  - name: rest
    match: {prefix: /}
    service: up
consumers:
  - {app_key: k, secret: 0123456789abcdef}
`

// TestRewriteCannotEscapeItsRoute: an escape that a second decode would
// turn into "..": refused with 400, never forwarded; escapes that are not
// dots go upstream exactly as sent.
func TestRewriteCannotEscapeItsRoute(t *testing.T) {
	t.Parallel()
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := testutil.StartRecordingUpstream(t)
			g := gatewaytest.Start(t, escapeRoutes, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}})
			// The ones a backend could read as dot segments are refused outright.
			for _, target := range []string{
				"/api/order/%252e%252e/%252e%252e/v1/order/create",
				"/orders/..%252f..%252fadmin", "/orders/..%2F..%2Fadmin", "/orders/..;/admin", `/orders/..\admin`,
			} {
				status, body, _, forwarded := g.Exchange(t, up, "GET "+target+" HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
				if status != 400 || forwarded || !gatewaytest.HasJSONCode([]byte(body), "400") {
					t.Errorf("%s: status %d forwarded=%v body %s, want 400 and nothing forwarded", target, status, forwarded, body)
				}
			}
			// Plain dot segments are resolved before routing: the request
			// is routed (and authenticated) as what it names.
			for _, target := range []string{"/api/order/../../v1/order/create", "/api/order/%2e%2e/%2E%2e/v1/order/create", "//v1//order/./create"} {
				status, _, _, forwarded := g.Exchange(t, up, "GET "+target+" HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
				if status != 401 || forwarded {
					t.Errorf("%s: status %d forwarded=%v, want 401 from the signed route", target, status, forwarded)
				}
			}
			// Escapes of reserved characters survive the rewrite as sent.
			for target, want := range map[string]string{
				"/api/order/a%2Fb?x=1":   "GET /v1/order/a%2Fb?x=1 HTTP/1.1",
				"/api/order/%7Eu/%252ex": "GET /v1/order/~u/%252ex HTTP/1.1",
				"/orders/a%2fb%3Fc%23d":  "GET /o/a%2Fb%3Fc%23d HTTP/1.1",
				"/orders/x%252fy":        "GET /o/x%252fy HTTP/1.1",
			} {
				status, _, got, forwarded := g.Exchange(t, up, "GET "+target+" HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
				if status != 200 || !forwarded || got.Line() != want {
					t.Errorf("%s: status %d, upstream got %q, want %q", target, status, got.Line(), want)
				}
			}
			// The offline redirect is built from the encoded path.
			res := testutil.RawExchange(t, g.Addr, []byte("GET /old/a%2Fb%3F?x=%2F HTTP/1.1\r\nHost: h\r\n\r\n"), 1, 2*time.Second)
			if len(res.Responses) != 1 || res.Responses[0].StatusCode() != 308 ||
				string(res.Responses[0].Header.Peek("Location")) != "/new/a%2Fb%3F?x=%2F" {
				t.Errorf("offline redirect: %v %q", res.Statuses(), res.Responses[0].Header.Peek("Location"))
			}
		})
	}
}

// TestForwardedFieldsCannotBeSpoofed: from an untrusted peer, every copy
// of a field that carries the caller's address, scheme, host or identity
// is removed and the gateway's own value is the only one; from a trusted
// proxy the whole X-Forwarded-For (all lines) is read, so a deny list sees
// the real client.
func TestForwardedFieldsCannotBeSpoofed(t *testing.T) {
	t.Parallel()
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := testutil.StartRecordingUpstream(t)
			g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}})
			raw := "GET /x HTTP/1.1\r\nX-Forwarded-For: 6.6.6.6\r\nHost: api.example.com\r\nx-forwarded-for: 7.7.7.7\r\n" +
				"X-Real-IP: 6.6.6.6\r\nX-Real-Ip: 6.6.6.7\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Proto: https\r\n" +
				"X-Forwarded-Host: evil.example\r\nForwarded: for=6.6.6.6;proto=https\r\nX-Forwarded-Port: 443\r\n" +
				"X-Forwarded-Prefix: /admin\r\nX-Original-URL: /admin\r\nX-Rewrite-URL: /admin\r\nTrue-Client-IP: 6.6.6.6\r\n" +
				"X-Client-IP: 6.6.6.6\r\nX_Forwarded_For: 6.6.6.6\r\nX-HTTP-Method-Override: DELETE\r\n" +
				"X-Consumer: root\r\nX_Consumer: root\r\nX-User-Id: 1\r\nX-Tollgate-Mirror: 1\r\nX-Keep: 1\r\n\r\n"
			status, _, got, ok := g.Exchange(t, up, raw)
			if status != 200 || !ok {
				t.Fatalf("status %d forwarded %v", status, ok)
			}
			want := map[string][]string{
				"X-Forwarded-For": {"127.0.0.1"}, "X-Real-IP": {"127.0.0.1"}, "X-Forwarded-Proto": {"http"},
				"X-Forwarded-Host": {"api.example.com"}, "Host": {"api.example.com"}, "X-Keep": {"1"},
			}
			for name, vals := range want {
				if g := got.Values(name); !slices.Equal(g, vals) {
					t.Errorf("%s: %q, want %q", name, g, vals)
				}
			}
			for _, name := range []string{"Forwarded", "X-Forwarded-Port", "X-Forwarded-Prefix", "X-Original-URL", "X-Rewrite-URL",
				"True-Client-IP", "X-Client-IP", "X_Forwarded_For", "X-HTTP-Method-Override", "X-Consumer", "X_Consumer", "X-User-Id",
				"X-Tollgate-Mirror"} {
				if v := got.Values(name); len(v) > 0 {
					t.Errorf("%s reached the upstream: %q", name, v)
				}
			}
		})
	}
}

const trustedACL = `
client:
  trusted_proxies: ["127.0.0.1"]
ip_acl:
  deny: ["203.0.113.0/24", "2001:db8::/32"]
services:
  up: {instances: [{addr: "${UP}"}]}
routes:
  - {name: all, match: {prefix: /}, service: up}
`

func TestTrustedProxyChainIsReadWhole(t *testing.T) {
	t.Parallel()
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := testutil.StartRecordingUpstream(t)
			g := gatewaytest.Start(t, trustedACL, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}})
			for _, c := range []struct {
				fields string
				status int
				xff    string
			}{
				// RFC 9110 joins repeated fields: the denied client is in the second line.
				{"X-Forwarded-For: 10.0.0.1\r\nX-Forwarded-For: 203.0.113.5\r\n", 403, ""},
				{"X-Forwarded-For: 203.0.113.5:4711\r\n", 403, ""},
				{"X-Forwarded-For: [2001:db8::1]:80\r\n", 403, ""},
				{"X-Forwarded-For: 2001:db8::1\r\n", 403, ""},
				{"X-Forwarded-For: 198.51.100.7, , 127.0.0.1\r\n", 200, "198.51.100.7, , 127.0.0.1, 127.0.0.1"},
				{"X-Forwarded-For: 198.51.100.7\r\nX-Forwarded-For: 127.0.0.1\r\n", 200, "198.51.100.7, 127.0.0.1, 127.0.0.1"},
				// A hop that is no address: the client is unknown, not the proxy.
				{"X-Forwarded-For: unknown\r\n", 400, ""},
				{"X-Forwarded-For: 203.0.113.5:99999\r\n", 400, ""},
			} {
				status, _, got, ok := g.Exchange(t, up, "GET /x HTTP/1.1\r\nHost: h\r\n"+c.fields+"\r\n")
				if status != c.status {
					t.Errorf("%q: status %d, want %d", c.fields, status, c.status)
					continue
				}
				if c.status != 200 {
					if ok {
						t.Errorf("%q: forwarded", c.fields)
					}
					continue
				}
				if v := got.Values("X-Forwarded-For"); !slices.Equal(v, []string{c.xff}) {
					t.Errorf("%q: upstream X-Forwarded-For %q, want %q", c.fields, v, c.xff)
				}
				if v := got.Values("X-Real-IP"); !slices.Equal(v, []string{"198.51.100.7"}) {
					t.Errorf("%q: X-Real-IP %q", c.fields, v)
				}
			}
		})
	}
}

// TestHostIsWhatWasRouted: the Host the route matched is the Host the
// upstream gets; a Host that two parsers could read differently is 400.
func TestHostIsWhatWasRouted(t *testing.T) {
	cfg := `
services:
  up: {instances: [{addr: "${UP}"}]}
  other: {instances: [{addr: "${UP}"}]}
routes:
  - {name: api, match: {host: api.example.com, prefix: /}, service: up}
`
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := testutil.StartRecordingUpstream(t)
			g := gatewaytest.Start(t, cfg, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}})
			for _, raw := range []string{
				"GET /x HTTP/1.1\r\nHost: api.example.com:1@internal.local\r\n\r\n",
				"GET /x HTTP/1.1\r\nHost: {api}\r\n\r\n",
				"GET /x HTTP/1.1\r\nHost: api.example.com/x\r\n\r\n",
				"GET http://u:p@api.example.com/x HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
				"GET https://api.example.com/x HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
				"GET http:///x HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
				"GET /x HTTP/1.0\r\n\r\n",
			} {
				status, body, _, ok := g.Exchange(t, up, raw)
				if status != 400 || ok || !gatewaytest.HasJSONCode([]byte(body), "400") {
					t.Errorf("%q: status %d forwarded=%v, want 400", raw, status, ok)
				}
			}
			for raw, line := range map[string]string{
				"GET //internal.local/x HTTP/1.1\r\nHost: api.example.com\r\n\r\n":         "GET /internal.local/x HTTP/1.1",
				"GET http://api.example.com/y?q HTTP/1.1\r\nHost: internal.local\r\n\r\n":  "GET /y?q HTTP/1.1",
				"GET http://API.example.com:8080 HTTP/1.1\r\nHost: internal.local\r\n\r\n": "GET / HTTP/1.1",
				"GET /z HTTP/1.1\r\nhost: api.example.com\r\n\r\n":                         "GET /z HTTP/1.1",
			} {
				status, _, got, ok := g.Exchange(t, up, raw)
				if status != 200 || !ok || got.Line() != line {
					t.Errorf("%q: status %d, upstream %q, want %q", raw, status, got.Line(), line)
					continue
				}
				hosts := got.Values("Host")
				if len(hosts) != 1 || !strings.EqualFold(strings.Split(hosts[0], ":")[0], "api.example.com") {
					t.Errorf("%q: upstream Host %q", raw, hosts)
				}
			}
		})
	}
}

// TestInternalNamesCannotBeSmuggled: reserved names in every spelling a
// backend folds to the same name, in the query and in a form body, and in
// header names with '_'.
func TestInternalNamesCannotBeSmuggled(t *testing.T) {
	t.Parallel()
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := testutil.StartRecordingUpstream(t)
			g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}})
			q := "a=1&internal_role=x&internal.role=x&internal+role=x&%20internal_role=x&INTERNAL-role=x&%69nternal_x=1;internal_y=2&b=2"
			form := "c=3&internal.role=admin&+internal_role=admin&d=4"
			raw := "POST /x?" + q + " HTTP/1.1\r\nHost: h\r\nContent-Type: application/x-www-form-urlencoded\r\n" +
				"X_Internal_Role: admin\r\nx-internal-role: admin\r\nX-INTERNAL-ROLE: admin\r\nContent-Length: " +
				strconv.Itoa(len(form)) + "\r\n\r\n" + form
			status, _, got, ok := g.Exchange(t, up, raw)
			if status != 200 || !ok {
				t.Fatalf("status %d forwarded %v", status, ok)
			}
			if got.Line() != "POST /x?a=1&b=2 HTTP/1.1" {
				t.Errorf("query: %q", got.Line())
			}
			if string(got.Body) != "c=3&d=4" || !slices.Equal(got.Values("Content-Length"), []string{"7"}) {
				t.Errorf("form: %q (Content-Length %q)", got.Body, got.Values("Content-Length"))
			}
			for _, f := range got.Fields() {
				if strings.Contains(strings.ToLower(strings.ReplaceAll(f, "_", "-")), "x-internal-") {
					t.Errorf("reserved header reached the upstream: %q", f)
				}
			}
			// A multipart part named like a reserved parameter cannot be cut
			// out of the body: refused.
			mp := "--B\r\nContent-Disposition: form-data; name=\"internal.role\"\r\n\r\nadmin\r\n--B--\r\n"
			status, _, _, ok = g.Exchange(t, up, "POST /x HTTP/1.1\r\nHost: h\r\nContent-Type: multipart/form-data; boundary=B\r\n"+
				"Content-Length: "+strconv.Itoa(len(mp))+"\r\n\r\n"+mp)
			if status != 400 || ok {
				t.Errorf("multipart with a reserved name: status %d forwarded %v", status, ok)
			}
			mp = strings.Replace(mp, "internal.role", "role", 1)
			status, _, _, ok = g.Exchange(t, up, "POST /x HTTP/1.1\r\nHost: h\r\nContent-Type: multipart/form-data; boundary=B\r\n"+
				"Content-Length: "+strconv.Itoa(len(mp))+"\r\n\r\n"+mp)
			if status != 200 || !ok {
				t.Errorf("plain multipart: status %d forwarded %v", status, ok)
			}
			// A compressed form hides its names from the gateway, not from a
			// backend that inflates it: refused.
			status, _, _, ok = g.Exchange(t, up, "POST /x HTTP/1.1\r\nHost: h\r\nContent-Type: application/x-www-form-urlencoded\r\n"+
				"Content-Encoding: identity\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\nabcd")
			if status != 415 || ok {
				t.Errorf("gzip form: status %d forwarded %v, want 415", status, ok)
			}
			// Two Content-Types: the gateway and the backend could each read
			// another, so neither is believed.
			status, _, _, ok = g.Exchange(t, up, "POST /x HTTP/1.1\r\nHost: h\r\nContent-Type: application/x-www-form-urlencoded\r\n"+
				"Content-Type: text/plain\r\nContent-Length: 14\r\n\r\ninternal_a=1&b")
			if status != 400 || ok {
				t.Errorf("two Content-Types: status %d forwarded %v", status, ok)
			}
		})
	}
}

// TestForwardedFaithfully: the query byte for byte, the path as sent,
// repeated fields in their order even when others are removed, names as
// the client spelled them, no Content-Type invented.
func TestForwardedFaithfully(t *testing.T) {
	t.Parallel()
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := testutil.StartRecordingUpstream(t)
			g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}})
			raw := "POST /a%2Fb/%7Ec?a=1;b=2&c=~!$'()*,:@/?&d=%zz&e=%2F+x HTTP/1.1\r\nHost: h\r\n" +
				"Cookie: a=1\r\nVia: 1.0 first\r\nConnection: x-hop\r\nx-hop: 1\r\nCookie: sid=\"q 1\"; b=2\r\n" +
				"X-Forwarded-For: 9.9.9.9\r\nVia: 1.1 second\r\nx-lower-Case: v\r\nCookie: c=3\r\nContent-Length: 3\r\n\r\nabc"
			status, _, got, ok := g.Exchange(t, up, raw)
			if status != 200 || !ok {
				t.Fatalf("status %d forwarded %v", status, ok)
			}
			if want := "POST /a%2Fb/%7Ec?a=1;b=2&c=~!$'()*,:@/?&d=%zz&e=%2F+x HTTP/1.1"; got.Line() != want {
				t.Errorf("request line %q, want %q", got.Line(), want)
			}
			if v := got.Values("Cookie"); !slices.Equal(v, []string{"a=1", `sid="q 1"; b=2`, "c=3"}) {
				t.Errorf("Cookie fields %q", v)
			}
			if v := got.Values("Via"); !slices.Equal(v, []string{"1.0 first", "1.1 second"}) {
				t.Errorf("Via fields %q", v)
			}
			var names []string
			for _, f := range got.Fields() {
				k, _, _ := strings.Cut(f, ":")
				names = append(names, k)
			}
			wantOrder := []string{"Host", "Cookie", "Via", "Cookie", "Via", "x-lower-Case", "Cookie"}
			if !slices.Equal(names[:len(wantOrder)], wantOrder) {
				t.Errorf("field order %q, want it to start %q", names, wantOrder)
			}
			if v := got.Values("x-hop"); len(v) > 0 {
				t.Errorf("a field named in Connection was forwarded")
			}
			if v := got.Values("Content-Type"); len(v) > 0 {
				t.Errorf("Content-Type invented: %q", v)
			}
			if string(got.Body) != "abc" {
				t.Errorf("body %q", got.Body)
			}
		})
	}
}

// TestHeaderPolicy: a route's allow or deny list and its credential
// switches apply to the client's fields only; the gateway's own fields are
// written after them.
func TestHeaderPolicy(t *testing.T) {
	cfg := `
services:
  up: {instances: [{addr: "${UP}"}]}
routes:
  - name: allow
    match: {prefix: /allow/}
    headers: {allow: [X-Tenant, accept]}
    service: up
  - name: deny
    match: {prefix: /deny/}
    headers: {deny: [X-Debug, User-Agent]}
    forward_authorization: false
    forward_cookies: false
    service: up
`
	fields := "X-Tenant: t1\r\nAccept: */*\r\nX-Debug: 1\r\nX_Debug: 1\r\nUser-Agent: ua\r\nAuthorization: Bearer x\r\n" +
		"authorization: Basic y\r\nCookie: s=1\r\nContent-Type: text/plain\r\nX-Forwarded-For: 1.1.1.1\r\nContent-Length: 1\r\n\r\nz"
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := testutil.StartRecordingUpstream(t)
			g := gatewaytest.Start(t, cfg, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}})
			names := func(r testutil.RawRequest) []string {
				var out []string
				for _, f := range r.Fields() {
					k, _, _ := strings.Cut(f, ":")
					out = append(out, k)
				}
				return out
			}
			_, _, got, ok := g.Exchange(t, up, "POST /allow/x HTTP/1.1\r\nHost: h\r\n"+fields)
			want := []string{"Host", "X-Tenant", "Accept", "Content-Type", "X-Forwarded-For", "X-Real-IP", "X-Forwarded-Proto",
				"X-Forwarded-Host", "traceparent", "X-Request-Id", "Content-Length"}
			if !ok || !slices.Equal(names(got), want) {
				t.Errorf("allow: fields %q, want %q", names(got), want)
			}
			_, _, got, ok = g.Exchange(t, up, "POST /deny/x HTTP/1.1\r\nHost: h\r\n"+fields)
			want = []string{"Host", "X-Tenant", "Accept", "Content-Type", "X-Forwarded-For", "X-Real-IP", "X-Forwarded-Proto",
				"X-Forwarded-Host", "traceparent", "X-Request-Id", "Content-Length"}
			if !ok || !slices.Equal(names(got), want) {
				t.Errorf("deny: fields %q, want %q", names(got), want)
			}
			if v := got.Values("X-Forwarded-For"); !slices.Equal(v, []string{"127.0.0.1"}) {
				t.Errorf("X-Forwarded-For %q", v)
			}
		})
	}
}
