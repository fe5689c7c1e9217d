package waf

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/pipeline"
)

func withFields(fields, body, ct string) string {
	h := "POST /api HTTP/1.1\r\nHost: h\r\n" + fields
	if ct != "" {
		h += "Content-Type: " + ct + "\r\n"
	}
	return h + fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
}

func multipartBody(parts ...string) string {
	return strings.Join(parts, "") + "--XB--\r\n"
}

func field(disposition, value string) string {
	return "--XB\r\nContent-Disposition: form-data; " + disposition + "\r\n\r\n" + value + "\r\n"
}

const mp = "multipart/form-data; boundary=XB"

// TestNoSideDoor: each way around the WAF an attacker found is closed at
// block — the attack is found, or the body that hides it is refused with
// the reason's status and counted.
func TestNoSideDoor(t *testing.T) {
	w, _ := New(Config{}, nil)
	deep := strings.Repeat("[", 1100) + `"1' or '1'='1"` + strings.Repeat("]", 1100)
	for _, tc := range []struct {
		what, raw string
		status    int
		why       reason
	}{
		{"multipart field", withFields("", multipartBody(field(`name="q"`, "1' OR '1'='1")), mp), 403, readWhole},
		{"multipart field name", withFields("", multipartBody(field(`name="<svg onload=alert(1)>"`, "x")), mp), 403, readWhole},
		{"multipart file name", withFields("", multipartBody(field(`name="f"; filename="x' or 1=1--.png"`, "PNG")), mp), 403, readWhole},
		{"multipart unterminated", withFields("", field(`name="q"`, "1' OR '1'='1"), mp), 400, unreadableMultipart},
		{"multipart base64 part", withFields("", multipartBody("--XB\r\nContent-Disposition: form-data; name=\"q\"\r\nContent-Transfer-Encoding: base64\r\n\r\nMScgT1IgJzEnPScx\r\n"), mp), 415, unknownEncoding},
		{"JSON NaN", withFields("", `{"a":NaN,"q":"1' or '1'='1"}`, "application/json"), 400, unreadableJSON},
		{"JSON BOM", withFields("", "\xef\xbb\xbf{\"q\":\"x\"}", "application/json"), 400, unreadableJSON},
		{"JSON UTF-16", withFields("", "{\x00\"\x00q\x00\"\x00:\x00\"\x00x\x00\"\x00}\x00", "application/json"), 400, unreadableJSON},
		{"JSON charset utf-16", withFields("", `{"q":"x"}`, "application/json; charset=utf-16"), 415, unknownEncoding},
		{"JSON trailing comma", withFields("", `{"q":"x",}`, "application/json"), 400, unreadableJSON},
		{"JSON single quotes", withFields("", `{'q':'x'}`, "application/json"), 400, unreadableJSON},
		{"JSON too deep", withFields("", deep, "application/json"), 400, tooDeep},
		{"JSON key", withFields("", `{"1' OR '1'='1":"x"}`, "application/json"), 403, readWhole},
		{"parameter name", get("/x?" + url.QueryEscape("<script>alert(1)</script>") + "=1"), 403, readWhole},
		{"form parameter name", withFields("", url.QueryEscape("1' or '1'='1")+"=x", "application/x-www-form-urlencoded"), 403, readWhole},
		{"text/plain body", withFields("", `{"q":"1' or '1'='1"}`, "text/plain"), 403, readWhole},
		{"no Content-Type", withFields("", `q=<script>alert(1)</script>`, ""), 403, readWhole},
		{"cookie value", withFields("Cookie: sid=abc; pref="+url.QueryEscape("1' OR '1'='1")+"\r\n", "", ""), 403, readWhole},
		{"cookie name", withFields("Cookie: <script>alert(1)</script>=1\r\n", "", ""), 403, readWhole},
		{"User-Agent", withFields("User-Agent: Mozilla' OR 1=1--\r\n", "", ""), 403, readWhole},
		{"Referer", withFields("Referer: javascript:alert(document.cookie)\r\n", "", ""), 403, readWhole},
	} {
		v, status, _ := verdict(t, w, tc.raw)
		if v != pipeline.Stop || status != tc.status {
			t.Errorf("%s: verdict %v status %d, want %d", tc.what, v, status, tc.status)
		}
	}
	c := w.Counts()
	for r, want := range map[reason]uint64{unreadableMultipart: 1, unknownEncoding: 2, unreadableJSON: 5, tooDeep: 1} {
		if got := c.Unread[r].Load(); got != want {
			t.Errorf("%s counted %d, want %d", ReasonNames[r], got, want)
		}
	}

	// other_bodies: refuse takes only what the WAF reads; pass lets text by.
	refuse, _ := New(Config{OtherBodies: "refuse"}, nil)
	if v, status, _ := verdict(t, refuse, withFields("", "hello", "text/plain")); v != pipeline.Stop || status != 415 || refuse.Counts().Unread[unknownMediaType].Load() != 1 {
		t.Errorf("other_bodies refuse: verdict %v status %d", v, status)
	}
	pass, _ := New(Config{OtherBodies: "pass"}, nil)
	if v, _, _ := verdict(t, pass, withFields("", "1' OR '1'='1", "text/plain")); v != pipeline.Continue {
		t.Error("other_bodies pass checked a text body")
	}
	// Headers: configurable, and allow-listable by name.
	none, _ := New(Config{Headers: &[]string{}}, nil)
	if v, _, _ := verdict(t, none, withFields("User-Agent: Mozilla' OR 1=1--\r\n", "", "")); v != pipeline.Continue {
		t.Error("headers: [] checked User-Agent")
	}
	custom, _ := New(Config{Headers: &[]string{"X-Search"}, Allow: []string{"cookie.prefs", "header.X-Search=' or true #"}}, nil)
	for raw, want := range map[string]pipeline.Verdict{
		withFields("X-Search: <script>alert(1)</script>\r\n", "", ""): pipeline.Stop,
		withFields("x-search: ' or true #\r\n", "", ""):               pipeline.Continue,
		withFields("User-Agent: Mozilla' OR 1=1--\r\n", "", ""):       pipeline.Continue,
		withFields("Cookie: prefs=1' OR '1'='1\r\n", "", ""):          pipeline.Continue,
	} {
		if v, _, _ := verdict(t, custom, raw); v != want {
			t.Errorf("custom headers: %q verdict %v, want %v", raw, v, want)
		}
	}
	// Log level: counted, decision names the reason, request goes on.
	logOnly, _ := New(Config{Level: "log"}, nil)
	if v, _, dec := verdict(t, logOnly, withFields("", `{"a":NaN}`, "application/json")); v != pipeline.Continue || dec != logHidden[unreadableJSON] {
		t.Errorf("log level: verdict %v decision %q", v, dec)
	}
}

// TestBenignRequestsPass: what browsers and API clients send passes —
// real User-Agents and Referers, session cookies, a multipart upload of a
// binary file, JSON with unicode escapes, an empty JSON body.
func TestBenignRequestsPass(t *testing.T) {
	w, _ := New(Config{}, nil)
	uas := []string{
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Safari/605.1.15",
		"Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Mobile/15E148 Safari/604.1",
		"curl/8.5.0", "okhttp/4.12.0", "python-requests/2.32.3", "Go-http-client/1.1",
		"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
	}
	referers := []string{"https://www.example.com/search?q=blue+chair&page=2", "https://shop.example.com/cart#checkout", "android-app://com.example.app/"}
	for _, ua := range uas {
		for _, ref := range referers {
			raw := withFields("User-Agent: "+ua+"\r\nReferer: "+ref+"\r\nCookie: sid=6f1c2a9e77b1; _ga=GA1.2.1234567890.1700000000; theme=dark\r\n", "", "")
			if v, status, _ := verdict(t, w, raw); v != pipeline.Continue {
				t.Errorf("refused (%d): UA %q Referer %q", status, ua, ref)
			}
		}
	}
	for _, raw := range []string{
		withFields("", multipartBody(field(`name="note"`, "I'd like it by Friday"), "--XB\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"me.png\"\r\nContent-Type: image/png\r\n\r\n\x89PNG\r\n\x1a\n' OR 1=1--\x00\r\n"), mp),
		withFields("", `{"name":"Zo\u00eb","note":"it's \"fine\""}`, "application/json"),
		withFields("", "", "application/json"),
		withFields("", "5 > 3 and 2 < 4, says O'Brien.", "text/plain"),
		withFields("", "\x89PNG\r\n\x1a\n", "image/png"),
	} {
		if v, status, _ := verdict(t, w, raw); v != pipeline.Continue {
			t.Errorf("refused (%d): %.100q", status, raw)
		}
	}
}

// TestHandleAllocsFields: a browser's request — a long User-Agent, a
// Referer, cookies, a multipart form of plain fields — allocates nothing
// once its header values are known clean.
func TestHandleAllocsFields(t *testing.T) {
	if testutil.Race {
		t.Skip("the race detector allocates; make test runs allocation gates without it")
	}
	w, _ := New(Config{}, nil)
	c := ctxOf(t, withFields("User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0\r\n"+
		"Referer: https://www.example.com/search?q=blue+chair&page=2\r\nCookie: sid=6f1c2a9e77b1; theme=dark\r\n",
		multipartBody(field(`name="id"`, "42"), field(`name="email"`, "anna.1@example.com")), mp))
	defer pipeline.Release(c)
	w.Handle(c)
	if n := testing.AllocsPerRun(100, func() { w.Handle(c) }); n != 0 {
		t.Fatalf("a browser request of plain values allocates %v times", n)
	}
}

// TestReportByReason: /metrics gets the bodies not read whole by reason.
func TestReportByReason(t *testing.T) {
	w, _ := New(Config{}, nil)
	verdict(t, w, withFields("", `{"a":NaN}`, "application/json"))
	verdict(t, w, withFields("", `{"a":1}`, "application/json; charset=latin1"))
	got := map[string]float64{}
	w.Report(func(f *pipeline.Family, v float64, labels ...string) {
		if f == hidden {
			got[labels[0]] = v
		}
		if f == blocked {
			got["blocked"] = v
		}
	})
	want := map[string]float64{"too_large": 0, "unknown_encoding": 1, "unreadable_json": 1, "too_deep": 0, "unreadable_multipart": 0, "unknown_media_type": 0, "blocked": 2}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("reported %v, want %v", got, want)
	}
}
