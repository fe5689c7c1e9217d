package server_test

import (
	"strconv"
	"testing"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/server/h2"
)

const pathRoutes = `
services:
  up: {instances: [{addr: "${UP}"}]}
routes:
  - name: admin
    match: {prefix: /admin}
    auth: signature
    service: up
  - name: rest
    match: {prefix: /}
    service: up
consumers:
  - {app_key: k, secret: 0123456789abcdef}
`

// pathCases: what reaches the backend for each path sent. A path whose
// escapes are only spelled differently from the canonical form goes as
// sent (RFC 9110 §7.7); one whose meaning canonicalization changed goes
// canonical, as before; one two parsers could read differently is 400.
var pathCases = []struct {
	sent, upstream string
	status         int
}{
	{"/a/%7euser", "/a/%7euser", 200},
	{"/a/%7Euser", "/a/%7Euser", 200},
	{"/a/caf%C3%A9", "/a/caf%C3%A9", 200},
	{"/a/caf%c3%a9?q=%7e", "/a/caf%c3%a9?q=%7e", 200},
	{"/a/x%2fy/%41", "/a/x%2fy/%41", 200},
	{"/a/%2e%2e/b", "/b", 200},
	{"/a/%2E/b/", "/a/b/", 200},
	{"/a/./b/../c", "/a/c", 200},
	{"//a//%7eb", "/a/~b", 200},
	{`/a\b`, "/a%5Cb", 200},
	{"/a/%252e%252e/admin", "", 400},
	{"/a/..%2fadmin", "", 400},
	{"/a/..;/admin", "", 400},
	{"/a/%2e%2e;/admin", "", 400},
	// Routed on the canonical path: the signed route's, whatever the spelling.
	{"/%61dmin/x", "", 401},
	{"/x/%2e%2e/admin/x", "", 401},
}

// TestPathForwardedAsSent: pathCases over HTTP/1.1 on every transport and
// over h2, against a recording upstream.
func TestPathForwardedAsSent(t *testing.T) {
	t.Parallel()
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			g, up := gatewaytest.StartRecorded(t, pathRoutes, gatewaytest.Options{Transport: kind})
			for _, c := range pathCases {
				status, _, got, forwarded := g.Exchange(t, up, "GET "+c.sent+" HTTP/1.1\r\nHost: h\r\n\r\n")
				if status != c.status || forwarded != (c.upstream != "") {
					t.Errorf("%s: status %d forwarded=%v, want %d", c.sent, status, forwarded, c.status)
					continue
				}
				if want := "GET " + c.upstream + " HTTP/1.1"; forwarded && got.Line() != want {
					t.Errorf("%s: upstream got %q, want %q", c.sent, got.Line(), want)
				}
			}
		})
		t.Run(kind+"/h2", func(t *testing.T) {
			e := gatewaytest.StartH2(t, pathRoutes, h2.Options{}, gatewaytest.Options{Transport: kind})
			r := e.DialH2(t)
			for _, c := range pathCases {
				before := e.Up.Count()
				o := r.Await(r.Send(nil, gatewaytest.H2Get(c.sent)...))
				got, _ := e.Up.Last()
				forwarded := e.Up.Count() > before
				if o.Status != strconv.Itoa(c.status) || forwarded != (c.upstream != "") {
					t.Errorf("h2 %s: %+v forwarded=%v, want %d", c.sent, o, forwarded, c.status)
					continue
				}
				if want := "GET " + c.upstream + " HTTP/1.1"; forwarded && got.Line() != want {
					t.Errorf("h2 %s: upstream got %q, want %q", c.sent, got.Line(), want)
				}
			}
		})
	}
}
