package waf_test

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
)

// TestWAFNoSideDoor: every way around the WAF an attacker's test found,
// as raw bytes over a socket: at block, the attack is refused with 403, or
// the body that hides it with 400/413/415 naming why; nothing reaches the
// recording upstream. Benign requests of the same shapes go through
// unchanged.
func TestWAFNoSideDoor(t *testing.T) {
	cfg := `
services:
  up: {instances: [{addr: "${UP}"}]}
client: {stream_body_bytes: 4096}
routes:
  - {name: guarded, match: {prefix: /guarded/}, waf: {level: block}, service: up}
  - {name: strict, match: {prefix: /strict/}, waf: {level: block, other_bodies: refuse, headers: [X-Search]}, service: up}
`
	post := func(path, fields, ct, body string) string {
		if ct != "" {
			fields += "Content-Type: " + ct + "\r\n"
		}
		return "POST " + path + " HTTP/1.1\r\nHost: h\r\n" + fields + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	part := func(disposition, value string) string {
		return "--XB\r\nContent-Disposition: form-data; " + disposition + "\r\n\r\n" + value + "\r\n"
	}
	const mp = "multipart/form-data; boundary=XB"
	sqli := "1' OR '1'='1"
	deep := strings.Repeat("[", 1100) + `"x"` + strings.Repeat("]", 1100)
	refused := []struct {
		what, raw string
		status    int
		message   string
	}{
		{"multipart field", post("/guarded/x", "", mp, part(`name="q"`, sqli)+"--XB--\r\n"), 403, "rule sqli"},
		{"multipart file name", post("/guarded/x", "", mp, part(`name="f"; filename="<svg onload=alert(1)>.png"`, "PNG")+"--XB--\r\n"), 403, "rule xss"},
		{"multipart unterminated", post("/guarded/x", "", mp, part(`name="q"`, "x")), 400, "multipart"},
		{"JSON NaN", post("/guarded/x", "", "application/json", `{"n":NaN,"q":"`+sqli+`"}`), 400, "not valid JSON"},
		{"JSON BOM", post("/guarded/x", "", "application/json", "\xef\xbb\xbf{\"q\":\"x\"}"), 400, "not valid JSON"},
		{"JSON UTF-16", post("/guarded/x", "", "application/json", "{\x00\"\x00q\x00\"\x00:\x001\x00}\x00"), 400, "not valid JSON"},
		{"JSON trailing comma", post("/guarded/x", "", "application/json", `{"q":"x",}`), 400, "not valid JSON"},
		{"JSON single quotes", post("/guarded/x", "", "application/json", `{'q':'x'}`), 400, "not valid JSON"},
		{"JSON too deep", post("/guarded/x", "", "application/json", deep), 400, "deeper than 1024"},
		{"JSON key", post("/guarded/x", "", "application/json", `{"`+sqli+`":1}`), 403, "rule sqli"},
		{"parameter name", "GET /guarded/x?" + url.QueryEscape("<script>alert(1)</script>") + "=1 HTTP/1.1\r\nHost: h\r\n\r\n", 403, "rule xss"},
		{"text/plain", post("/guarded/x", "", "text/plain", `{"q":"`+sqli+`"}`), 403, "rule sqli"},
		{"no Content-Type", post("/guarded/x", "", "", "q="+url.QueryEscape(sqli)), 403, "rule sqli"},
		{"text/plain where only known bodies go", post("/strict/x", "", "text/plain", "hello"), 415, "media type"},
		{"cookie", "GET /guarded/x HTTP/1.1\r\nHost: h\r\nCookie: sid=1; pref=" + url.QueryEscape(sqli) + "\r\n\r\n", 403, "rule sqli"},
		{"User-Agent", "GET /guarded/x HTTP/1.1\r\nHost: h\r\nUser-Agent: x' or 1=1--\r\n\r\n", 403, "rule sqli"},
		{"Referer", "GET /guarded/x HTTP/1.1\r\nHost: h\r\nReferer: javascript:alert(document.cookie)\r\n\r\n", 403, "rule xss"},
		{"a header the route names", "GET /strict/x HTTP/1.1\r\nHost: h\r\nX-Search: <img src=x onerror=alert(1)>\r\n\r\n", 403, "rule xss"},
		{"tautology", "GET /guarded/x?id=1+or+true HTTP/1.1\r\nHost: h\r\n\r\n", 403, "rule sqli"},
		{"comment truncation", "GET /guarded/x?user=admin%27+%23 HTTP/1.1\r\nHost: h\r\n\r\n", 403, "rule sqli"},
		{"streamed multipart", post("/guarded/x", "", mp, part(`name="f"; filename="a.bin"`, strings.Repeat("A", 8192))+part(`name="q"`, sqli)+"--XB--\r\n"), 413, "too large"},
	}
	passed := []struct{ what, raw string }{
		{"arithmetic", "GET /guarded/x?q=" + url.QueryEscape("5 > 3 and 2 < 4") + " HTTP/1.1\r\nHost: h\r\n\r\n"},
		{"prose", "GET /guarded/x?q=" + url.QueryEscape("It's O'Brien's order, rock 'n' roll") + " HTTP/1.1\r\nHost: h\r\n\r\n"},
		{"browser", "GET /guarded/x HTTP/1.1\r\nHost: h\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0\r\nReferer: https://shop.example.com/search?q=blue+chair\r\nCookie: sid=6f1c2a9e; theme=dark\r\n\r\n"},
		{"multipart upload", post("/guarded/x", "", mp, part(`name="note"`, "I'd like it by Friday")+part(`name="photo"; filename="me.png"`, "\x89PNG' OR 1=1--")+"--XB--\r\n")},
		{"JSON", post("/guarded/x", "", "application/json", `{"name":"Zo\u00eb O'Brien","qty":2}`)},
		{"text", post("/guarded/x", "", "text/plain", "5 > 3 and 2 < 4, says O'Brien.")},
		{"JSON where only known bodies go", post("/strict/x", "User-Agent: x' or 1=1--\r\n", "application/json", `{"id":42}`)},
	}
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := testutil.StartRecordingUpstream(t)
			g := gatewaytest.Start(t, cfg, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}})
			for _, tc := range refused {
				status, body, _, forwarded := g.Exchange(t, up, tc.raw)
				if status != tc.status || forwarded || !strings.Contains(body, tc.message) || !gatewaytest.HasJSONCode([]byte(body), strconv.Itoa(tc.status)) {
					t.Errorf("%s: status %d forwarded %v body %.200s", tc.what, status, forwarded, body)
				}
			}
			for _, tc := range passed {
				status, body, got, forwarded := g.Exchange(t, up, tc.raw)
				wantBody := tc.raw[strings.Index(tc.raw, "\r\n\r\n")+4:]
				if status != 200 || !forwarded || string(got.Body) != wantBody {
					t.Errorf("%s: status %d forwarded %v body %.200s; upstream got %.200q", tc.what, status, forwarded, body, got.Body)
				}
			}
		})
	}
}
