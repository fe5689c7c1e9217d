package server_test

import (
	"testing"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/server/h2"
)

// headRoutes: a signed GET-only route and a GET-only limited route in
// front of a public catch-all, as an operator writes them.
const headRoutes = `
services:
  up: {instances: [{addr: "${UP}"}]}
routes:
  - name: private
    match: {prefix: /priv/, methods: [GET]}
    auth: signature
    service: up
  - name: limited
    match: {prefix: /lim/, methods: [GET]}
    limits: [{by: ip, rate: 1, per: 1m, burst: 1, scope: local}]
    service: up
  - name: public
    match: {prefix: /}
    service: up
consumers:
  - {app_key: k, secret: 0123456789abcdef}
`

// TestHeadTakesTheGetRoute: HEAD is GET without a body, so a GET-only
// route owns it: an unsigned HEAD to the signed route is refused, not
// passed to the public route behind it, and HEAD counts against a
// GET-only limit. Over HTTP/1.1 on every transport and over h2.
func TestHeadTakesTheGetRoute(t *testing.T) {
	t.Parallel()
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			g, up := gatewaytest.StartRecorded(t, headRoutes, gatewaytest.Options{Transport: kind})
			status, _, _, forwarded := g.Exchange(t, up, "HEAD /priv/secret HTTP/1.1\r\nHost: h\r\n\r\n")
			if status != 401 || forwarded {
				t.Errorf("HEAD /priv/secret: status %d forwarded=%v, want 401 and nothing forwarded", status, forwarded)
			}
			status, _, _, forwarded = g.Exchange(t, up, "POST /priv/secret HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n")
			if status != 200 || !forwarded {
				t.Errorf("POST /priv/secret: status %d forwarded=%v, want the public route's 200", status, forwarded)
			}
			status, _, _, _ = g.Exchange(t, up, "GET /lim/a HTTP/1.1\r\nHost: h\r\n\r\n")
			if status != 200 {
				t.Fatalf("first GET /lim/a: %d", status)
			}
			status, _, _, forwarded = g.Exchange(t, up, "HEAD /lim/a HTTP/1.1\r\nHost: h\r\n\r\n")
			if status != 911 || forwarded {
				t.Errorf("HEAD after the GET limit is spent: status %d forwarded=%v, want the local limit's 911", status, forwarded)
			}
		})
		t.Run(kind+"/h2", func(t *testing.T) {
			e := gatewaytest.StartH2(t, headRoutes, h2.Options{}, gatewaytest.Options{Transport: kind})
			r := e.DialH2(t)
			head := func(path string) []string {
				return []string{":method", "HEAD", ":scheme", "https", ":authority", "a.test", ":path", path}
			}
			before := e.Up.Count()
			if o := r.Await(r.Send(nil, head("/priv/secret")...)); o.Status != "401" || e.Up.Count() != before {
				t.Errorf("h2 HEAD /priv/secret: %+v, forwarded %d, want 401 and nothing forwarded", o, e.Up.Count()-before)
			}
			if o := r.Await(r.Send(nil, gatewaytest.H2Get("/lim/a")...)); o.Status != "200" {
				t.Fatalf("h2 first GET /lim/a: %+v", o)
			}
			if o := r.Await(r.Send(nil, head("/lim/a")...)); o.Status != "911" {
				t.Errorf("h2 HEAD after the GET limit is spent: %+v, want 911", o)
			}
		})
	}
}
