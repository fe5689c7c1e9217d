package waf

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/pipeline"
)

func multipart(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString("--XyZ\r\n" + p + "\r\n")
	}
	b.WriteString("--XyZ--\r\n")
	return b.String()
}

func field(name, value string) string {
	return fmt.Sprintf("Content-Disposition: form-data; name=%q\r\n\r\n%s", name, value)
}

func file(name, filename, content string) string {
	return fmt.Sprintf("Content-Disposition: form-data; name=%q; filename=%q\r\nContent-Type: application/octet-stream\r\n\r\n%s", name, filename, content)
}

const mpType = "multipart/form-data; boundary=XyZ"

func withField(name, value string) string {
	return fmt.Sprintf("GET /api HTTP/1.1\r\nHost: h\r\n%s: %s\r\n\r\n", name, value)
}

// TestNoSideDoor is the finding, one case each: the payload moved where
// the WAF did not look, or wrapped in a body it could not read. Every one
// reached the backend before; every one is refused now.
func TestNoSideDoor(t *testing.T) {
	w, err := New(Config{Level: "block"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const sqlPayload = "1' OR '1'='1"
	deep := strings.Repeat(`{"a":`, 1100) + `"` + sqlPayload + `"` + strings.Repeat("}", 1100)
	for name, raw := range map[string]string{
		"multipart field":            post(mpType, multipart(field("comment", sqlPayload))),
		"multipart field name":       post(mpType, multipart(field(sqlPayload, "x"))),
		"multipart file name":        post(mpType, multipart(file("f", "<svg onload=alert(1)>.png", "PNG"))),
		"multipart unparseable":      post(mpType, "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n"+sqlPayload),
		"multipart no boundary":      post("multipart/form-data", multipart(field("a", "b"))),
		"JSON with NaN":              post("application/json", `{"a":NaN,"q":"`+sqlPayload+`"}`),
		"JSON with a BOM":            post("application/json", "\xef\xbb\xbf"+`{"q":"`+sqlPayload+`"}`),
		"JSON in UTF-16":             post("application/json", "\xff\xfe{\x00\"\x00q\x00\"\x00:\x00\"\x001\x00'\x00\"\x00}\x00"),
		"JSON with a trailing comma": post("application/json", `{"q":"`+sqlPayload+`",}`),
		"JSON with single quotes":    post("application/json", `{'q':'`+strings.ReplaceAll(sqlPayload, "'", `\'`)+`'}`),
		"JSON nested past 1,024":     post("application/json", deep),
		"JSON key":                   post("application/json", `{"`+strings.ReplaceAll(sqlPayload, "'", "'")+`":1}`),
		"parameter name":             get("/api?" + url.QueryEscape(sqlPayload) + "=1"),
		"form field name":            post("application/x-www-form-urlencoded", url.QueryEscape("<script>alert(1)</script>")+"=1"),
		"text/plain":                 post("text/plain", sqlPayload),
		"no Content-Type":            fmt.Sprintf("POST /api HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n%s", len(sqlPayload), sqlPayload),
		"cookie":                     withField("Cookie", "session=abc; q="+url.QueryEscape(sqlPayload)),
		"cookie raw":                 withField("Cookie", "q=1' OR '1'='1"),
		"User-Agent":                 withField("User-Agent", "<script>alert(1)</script>"),
		"Referer":                    withField("Referer", "https://x.example/?q="+url.QueryEscape(sqlPayload)),
		"javascript: URL":            get("/api?next=" + url.QueryEscape("javascript:alert(1)")),
		"tautology with true":        get("/api?id=" + url.QueryEscape("1 or true")),
		"comment after a quote":      get("/api?user=" + url.QueryEscape("admin' #")),
	} {
		v, status, _ := verdict(t, w, raw)
		if v != pipeline.Stop || status < 400 {
			t.Errorf("%s: not refused (verdict %v, status %d)", name, v, status)
		}
	}
}

// TestNoSideDoorLetsTheOrdinaryThrough: the same places, ordinary values.
func TestNoSideDoorLetsTheOrdinaryThrough(t *testing.T) {
	w, _ := New(Config{Level: "block"}, nil)
	for name, raw := range map[string]string{
		"multipart form":  post(mpType, multipart(field("name", "O'Brien"), field("note", "5 > 3 and 2 < 4"), file("photo", "me at the beach.jpg", "\x89PNG\x00' OR 1=1"))),
		"JSON":            post("application/json", `{"name":"D'Angelo","items":[{"sku":"A-1","qty":2}],"note":"it's a nice day"}`),
		"text/plain":      post("text/plain", "see you at 5 pm -- bring the cake"),
		"cookie":          withField("Cookie", "session=6f1c2a9e77b14c2e; theme=dark; consent=yes"),
		"browser":         withField("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"),
		"referer":         withField("Referer", "https://shop.example.com/search?q=red+shoes&page=2"),
		"parameter names": get("/api?page=2&sort=price_asc&filter.brand=acme"),
	} {
		if v, status, dec := verdict(t, w, raw); v != pipeline.Continue {
			t.Errorf("%s: refused (%d, %s)", name, status, dec)
		}
	}
	// Media types a route accepts: others are refused.
	jsonOnly, _ := New(Config{Bodies: []string{"application/json"}}, nil)
	if v, status, _ := verdict(t, jsonOnly, post("text/xml", "<a/>")); v != pipeline.Stop || status != 415 {
		t.Errorf("bodies: [application/json] took text/xml (%d)", status)
	}
	if v, _, _ := verdict(t, jsonOnly, post("application/json", `{"a":1}`)); v != pipeline.Continue {
		t.Error("bodies: [application/json] refused JSON")
	}
	// Chosen fields only, and cookies off.
	narrow, _ := New(Config{Headers: &[]string{"X-Comment"}, Cookies: new(bool)}, nil)
	if v, _, _ := verdict(t, narrow, withField("User-Agent", "<script>alert(1)</script>")); v != pipeline.Continue {
		t.Error("headers: [X-Comment] still checked User-Agent")
	}
	if v, _, _ := verdict(t, narrow, withField("X-Comment", "<script>alert(1)</script>")); v != pipeline.Stop {
		t.Error("headers: [X-Comment] did not check X-Comment")
	}
	if v, _, _ := verdict(t, narrow, withField("Cookie", "q=1' OR '1'='1")); v != pipeline.Continue {
		t.Error("cookies: false still checked cookies")
	}
}

// TestUnreadableCountedByReason: each body refused unread is counted
// under its reason, at log level too (where it goes through).
func TestUnreadableCountedByReason(t *testing.T) {
	w, _ := New(Config{Level: "log"}, nil)
	for _, raw := range []string{
		post("application/json", `{"a":NaN}`),
		post("application/json", strings.Repeat("[", 1100)+strings.Repeat("]", 1100)),
		post(mpType, "--XyZ\r\nno end"),
	} {
		if v, _, dec := verdict(t, w, raw); v != pipeline.Continue || !strings.HasPrefix(dec, "waf: body") {
			t.Errorf("log level: verdict %v decision %q", v, dec)
		}
	}
	for r, want := range []uint64{1, 1, 1, 0} {
		if got := w.counts.Unreadable[r].Load(); got != want {
			t.Errorf("%s: counted %d, want %d", reasonNames[r], got, want)
		}
	}
}
