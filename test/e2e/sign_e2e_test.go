//go:build e2e

package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/sign"
)

func signConfig(upAddr string) string {
	return fmt.Sprintf(`
watch: false
consumers:
  - {app_key: demo-app, secret: %q, tier: basic}
  - {app_key: strict-app, secret: %q, sign: v2}
services:
  up: {instances: [{addr: %q}]}
routes:
  - {name: signed, match: {prefix: /api/}, auth: signature, service: up}
`, demoSecret, demoSecret, upAddr)
}

// rawSend writes one request with its target byte for byte (no client
// library normalizing the path) and returns the answer.
func rawSend(t *testing.T, addr, method, target string, h http.Header, ct, body string) (int, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, target, addr)
	for k, vs := range h {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	if ct != "" {
		fmt.Fprintf(&b, "Content-Type: %s\r\n", ct)
	}
	if body != "" {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(got)
}

// TestSignedRepeatedParameterRefused: a signature covers one value of a
// repeated parameter, so a request repeating a signed parameter with
// another value (the upstream would see both) is refused with 400 and
// never forwarded; an identical repeat goes through.
func TestSignedRepeatedParameterRefused(t *testing.T) {
	up := testutil.StartUpstream(t, "ok")
	a := freePort(t)
	startProc(t, a, "off", nil, "run", "-c", writeConfig(t, signConfig(up.Addr)))
	headers := func(method, target, form string) http.Header {
		u, _ := url.Parse("http://" + a + target)
		h, err := sign.Headers("demo-app", demoSecret, method, u, form, time.Time{}, "")
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, tc := range []struct {
		name                   string
		method                 string
		signedTarget, signedFm string
		sentTarget, sentForm   string
	}{
		{"query", "GET", "/api/pay?amount=1", "", "/api/pay?amount=1&amount=1000", ""},
		{"form", "POST", "/api/pay", "amount=1", "/api/pay", "amount=1&amount=1000"},
		{"query and form", "POST", "/api/pay?amount=1", "", "/api/pay?amount=1", "amount=1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := up.Requests.Load()
			ct := ""
			if tc.sentForm != "" {
				ct = sign.FormContentType
			}
			st, body := rawSend(t, a, tc.method, tc.sentTarget, headers(tc.method, tc.signedTarget, tc.signedFm), ct, tc.sentForm)
			if st != 400 || !strings.Contains(body, `"code":400`) ||
				!strings.Contains(body, `"message":"repeated parameter with different values: amount"`) {
				t.Fatalf("got %d %s, want 400 naming amount", st, body)
			}
			if n := up.Requests.Load(); n != before {
				t.Fatalf("the refused request reached the upstream")
			}
		})
	}
	target := "/api/pay?amount=1&amount=1"
	if st, body := rawSend(t, a, "GET", target, headers("GET", target, ""), "", ""); st != 200 || up.Last().URI != target {
		t.Fatalf("identical repeat: %d %s, upstream got %q", st, body, up.Last().URI)
	}
}

// TestSignV2EndToEnd: a consumer configured with sign: v2 is held to
// scheme v2 (method, path and body signed), with signatures from the Go
// package and from `tollgate sign --v2`.
func TestSignV2EndToEnd(t *testing.T) {
	up := testutil.StartUpstream(t, "ok")
	a := freePort(t)
	startProc(t, a, "off", nil, "run", "-c", writeConfig(t, signConfig(up.Addr)))
	headers := func(appKey, method, target, ct, body string) http.Header {
		u, _ := url.Parse("http://" + a + target)
		h, err := sign.HeadersV2(appKey, demoSecret, method, u, ct, body, time.Time{}, "")
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	const ct, body = "application/json", `{"sku":"A-1","amount":"19.90"}`
	st, resp := rawSend(t, a, "POST", "/api/orders?channel=app", headers("strict-app", "POST", "/api/orders?channel=app", ct, body), ct, body)
	if st != 200 || string(up.Last().Body) != body || up.Last().Header("X-Consumer") != "strict-app" {
		t.Fatalf("v2 JSON POST: %d %s; upstream %q %v", st, resp, up.Last().Body, up.Last().Headers)
	}
	if st, resp := rawSend(t, a, "GET", "/api/files/a%2Fb;v=1", headers("strict-app", "GET", "/api/files/a%2Fb;v=1", "", ""), "", ""); st != 200 {
		t.Fatalf("reserved escape in the path: %d %s", st, resp)
	}

	v1, err := sign.Headers("strict-app", demoSecret, "GET", &url.URL{RawQuery: "a=1"}, "", time.Time{}, "")
	if err != nil {
		t.Fatal(err)
	}
	bogus := headers("strict-app", "GET", "/api/x", "", "")
	bogus.Set(sign.HeaderSign, strings.Repeat("0", 64))
	for _, tc := range []struct {
		name, method, target, ct, body string
		h                              http.Header
		code                           int
		msg                            string
	}{
		{"JSON body changed", "POST", "/api/orders", ct, `{"sku":"A-1","amount":"1999.00"}`,
			headers("strict-app", "POST", "/api/orders", ct, body), 401, "signature does not match"},
		{"method changed", "DELETE", "/api/orders/42", "", "", headers("strict-app", "GET", "/api/orders/42", "", ""), 401, "signature does not match"},
		{"path changed", "GET", "/api/orders/43", "", "", headers("strict-app", "GET", "/api/orders/42", "", ""), 401, "signature does not match"},
		{"v1 signature", "GET", "/api/x?a=1", "", "", v1, 401, "signature does not match"},
		{"v2 signature from a v1 consumer", "GET", "/api/x", "", "", headers("demo-app", "GET", "/api/x", "", ""), 401, "signature does not match"},
		{"path not canonical", "GET", "/api/%7Ex", "", "", bogus, 401, ""},
		{"repeated parameter", "GET", "/api/x?amount=1&amount=1000", "", "", headers("strict-app", "GET", "/api/x?amount=1", "", ""), 400,
			"repeated parameter with different values: amount"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := up.Requests.Load()
			st, resp := rawSend(t, a, tc.method, tc.target, tc.h, tc.ct, tc.body)
			if st != tc.code || !strings.Contains(resp, tc.msg) || up.Requests.Load() != before {
				t.Fatalf("got %d %s, want %d %q (upstream requests %d → %d)", st, resp, tc.code, tc.msg, before, up.Requests.Load())
			}
		})
	}

	// The command line signs what it prints.
	out, err := exec.Command(binary, "sign", "--v2", "--app-key", "strict-app", "--secret", demoSecret,
		"--method", "PUT", "--content-type", ct, "http://"+a+"/api/orders/42?x=%E5%90%8D", "-d", body).Output()
	if err != nil {
		t.Fatalf("tollgate sign --v2: %v", err)
	}
	h := http.Header{}
	for line := range strings.Lines(string(out)) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ": ")
		h.Set(k, v)
	}
	if st, resp := rawSend(t, a, "PUT", "/api/orders/42?x=%E5%90%8D", h, ct, body); st != 200 || string(up.Last().Body) != body {
		t.Fatalf("signed by tollgate sign --v2: %d %s", st, resp)
	}
}

// TestValidateSigningSettings: the consumer's sign and the jwt section's
// require_exp are checked when the file is loaded.
func TestValidateSigningSettings(t *testing.T) {
	good := signConfig("127.0.0.1:1") + `jwt:
  require_exp: false
  keys:
    - {kid: k1, alg: HS256, secret: "jwt-secret-for-tests-0123456789abcdef"}
`
	if out, err := exec.Command(binary, "validate", writeConfig(t, good)).CombinedOutput(); err != nil {
		t.Fatalf("validate: %v %s", err, out)
	}
	for name, cfg := range map[string]string{
		"unknown scheme":        strings.Replace(good, "sign: v2", "sign: v3", 1),
		"app key in jwt: space": strings.Replace(good, "app_key: strict-app", "app_key: 'jwt:strict-app'", 1),
		"require_exp not bool":  strings.Replace(good, "require_exp: false", "require_exp: sometimes", 1),
	} {
		out, err := exec.Command(binary, "validate", writeConfig(t, cfg)).CombinedOutput()
		if err == nil {
			t.Errorf("%s: validate accepted it: %s", name, out)
		}
	}
}
