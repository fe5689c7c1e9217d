package server

import (
	"net/url"
	"strings"
	"testing"

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
	for _, kind := range transports {
		t.Run(kind, func(t *testing.T) {
			up := testutil.StartRecordingUpstream(t)
			g := startGateway(t, kind, cfg, map[string]string{"UP": up.Addr}, nil)
			for _, raw := range []string{
				"GET /guarded/x?id=" + attack + " HTTP/1.1\r\nHost: h\r\n\r\n",
				"GET /guarded/" + url.PathEscape("<script>alert(1)</script>") + " HTTP/1.1\r\nHost: h\r\n\r\n",
				"POST /guarded/x HTTP/1.1\r\nHost: h\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: " +
					itoa(len("a=1&b="+attack)) + "\r\n\r\na=1&b=" + attack,
				"POST /guarded/x HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: " +
					itoa(len(jsonAttack)) + "\r\n\r\n" + jsonAttack,
			} {
				status, body, _, forwarded := exchange(t, g, up, raw)
				if status != 403 || forwarded || !strings.Contains(body, "request blocked by WAF rule") || !hasJSONCode([]byte(body), "403") {
					t.Errorf("%q: status %d forwarded %v body %s", raw, status, forwarded, body)
				}
			}
			for _, target := range []string{"/guarded/x?raw=" + attack, "/watched/x?id=" + attack, "/open/x?id=" + attack, "/guarded/x?q=select+a+chair"} {
				status, _, _, forwarded := exchange(t, g, up, "GET "+target+" HTTP/1.1\r\nHost: h\r\n\r\n")
				if status != 200 || !forwarded {
					t.Errorf("%s: status %d forwarded %v, want it through", target, status, forwarded)
				}
			}
		})
	}
}

// TestWAFNoSideDoor: through a gateway to a recording upstream, on every
// transport, a payload put where the WAF did not look before (a multipart
// field, a JSON key, a parameter name, a cookie, User-Agent, Referer, a
// text/plain body) or wrapped in a JSON body it could not parse (NaN, a
// byte order mark, a trailing comma, 1,100 levels deep) is refused and
// never reaches the backend; an ordinary request of each kind does.
func TestWAFNoSideDoor(t *testing.T) {
	cfg := `
services:
  up: {instances: [{addr: "${UP}"}]}
routes:
  - {name: guarded, match: {prefix: /}, waf: {level: block}, service: up}
`
	const sqlPayload = "1' OR '1'='1"
	req := func(method, target, fields, ct, body string) string {
		s := method + " " + target + " HTTP/1.1\r\nHost: h\r\n" + fields
		if ct != "" {
			s += "Content-Type: " + ct + "\r\n"
		}
		if body != "" || method == "POST" {
			s += "Content-Length: " + itoa(len(body)) + "\r\n"
		}
		return s + "\r\n" + body
	}
	mp := "--B\r\nContent-Disposition: form-data; name=\"comment\"\r\n\r\n" + sqlPayload + "\r\n--B--\r\n"
	deep := strings.Repeat(`{"a":`, 1100) + `"` + sqlPayload + `"` + strings.Repeat("}", 1100)
	refused := map[string]string{
		"multipart field":   req("POST", "/x", "", "multipart/form-data; boundary=B", mp),
		"JSON with NaN":     req("POST", "/x", "", "application/json", `{"n":NaN,"q":"`+sqlPayload+`"}`),
		"JSON with a BOM":   req("POST", "/x", "", "application/json", "\xef\xbb\xbf"+`{"q":"`+sqlPayload+`"}`),
		"JSON trailing ,":   req("POST", "/x", "", "application/json", `{"q":"`+sqlPayload+`",}`),
		"JSON deep":         req("POST", "/x", "", "application/json", deep),
		"JSON key":          req("POST", "/x", "", "application/json", `{"`+sqlPayload+`":1}`),
		"parameter name":    req("GET", "/x?"+url.QueryEscape(sqlPayload)+"=1", "", "", ""),
		"text/plain body":   req("POST", "/x", "", "text/plain", sqlPayload),
		"no Content-Type":   req("POST", "/x", "", "", sqlPayload),
		"cookie":            req("GET", "/x", "Cookie: q="+url.QueryEscape(sqlPayload)+"\r\n", "", ""),
		"User-Agent":        req("GET", "/x", "User-Agent: <script>alert(1)</script>\r\n", "", ""),
		"Referer":           req("GET", "/x", "Referer: https://a.example/?q="+url.QueryEscape(sqlPayload)+"\r\n", "", ""),
		"javascript: URL":   req("GET", "/x?next="+url.QueryEscape("javascript:alert(1)"), "", "", ""),
		"bare tautology":    req("GET", "/x?id="+url.QueryEscape("1 or true"), "", "", ""),
		"quote and comment": req("GET", "/x?user="+url.QueryEscape("admin' #"), "", "", ""),
	}
	passed := map[string]string{
		"multipart":  req("POST", "/x", "", "multipart/form-data; boundary=B", "--B\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nO'Brien\r\n--B--\r\n"),
		"JSON":       req("POST", "/x", "", "application/json", `{"name":"D'Angelo","qty":2}`),
		"text/plain": req("POST", "/x", "", "text/plain", "5 > 3 and 2 < 4"),
		"browser":    req("GET", "/x?q=red+shoes", "User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36\r\nReferer: https://shop.example/?q=shoes\r\nCookie: session=abc123; theme=dark\r\n", "", ""),
	}
	for _, kind := range transports {
		t.Run(kind, func(t *testing.T) {
			up := testutil.StartRecordingUpstream(t)
			g := startGateway(t, kind, cfg, map[string]string{"UP": up.Addr}, nil)
			for name, raw := range refused {
				if status, _, _, forwarded := exchange(t, g, up, raw); status < 400 || forwarded {
					t.Errorf("%s: status %d, forwarded %v", name, status, forwarded)
				}
			}
			for name, raw := range passed {
				if status, body, _, forwarded := exchange(t, g, up, raw); status != 200 || !forwarded {
					t.Errorf("%s: status %d, forwarded %v: %s", name, status, forwarded, body)
				}
			}
		})
	}
}
