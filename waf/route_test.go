package waf_test

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
)

// TestWAFOnARoute: the waf feature configured on routes blocks with a 403
// naming the rule, or logs and forwards, and leaves other routes alone.
func TestWAFOnARoute(t *testing.T) {
	cfg := `
services:
  up: {instances: [{addr: "${UP}"}]}
routes:
  - {name: guarded, match: {prefix: /guarded/}, waf: {level: block, allow: [query.raw]}, service: up}
  - {name: watched, match: {prefix: /watched/}, waf: {level: log}, service: up}
  - {name: open, match: {prefix: /}, service: up}
`
	attack := url.QueryEscape("1' OR '1'='1")
	const jsonAttack = `{"q":{"n":"<img src=x onerror=alert(1)>"}}`
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := testutil.StartRecordingUpstream(t)
			g := gatewaytest.Start(t, cfg, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}})
			for _, raw := range []string{
				"GET /guarded/x?id=" + attack + " HTTP/1.1\r\nHost: h\r\n\r\n",
				"GET /guarded/" + url.PathEscape("<script>alert(1)</script>") + " HTTP/1.1\r\nHost: h\r\n\r\n",
				"POST /guarded/x HTTP/1.1\r\nHost: h\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: " +
					strconv.Itoa(len("a=1&b="+attack)) + "\r\n\r\na=1&b=" + attack,
				"POST /guarded/x HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: " +
					strconv.Itoa(len(jsonAttack)) + "\r\n\r\n" + jsonAttack,
			} {
				status, body, _, forwarded := g.Exchange(t, up, raw)
				if status != 403 || forwarded || !strings.Contains(body, "request blocked by WAF rule") || !gatewaytest.HasJSONCode([]byte(body), "403") {
					t.Errorf("%q: status %d forwarded %v body %s", raw, status, forwarded, body)
				}
			}
			for _, target := range []string{"/guarded/x?raw=" + attack, "/watched/x?id=" + attack, "/open/x?id=" + attack, "/guarded/x?q=select+a+chair"} {
				status, _, _, forwarded := g.Exchange(t, up, "GET "+target+" HTTP/1.1\r\nHost: h\r\n\r\n")
				if status != 200 || !forwarded {
					t.Errorf("%s: status %d forwarded %v, want it through", target, status, forwarded)
				}
			}
		})
	}
}
