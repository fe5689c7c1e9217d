package sign

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestNewNonce(t *testing.T) {
	a, b := NewNonce(), NewNonce()
	if len(a) != 32 || strings.Trim(a, "0123456789abcdef") != "" {
		t.Errorf("NewNonce = %q; want 32 lowercase hex digits", a)
	}
	if a == b {
		t.Errorf("two nonces are equal: %q", a)
	}
}

func TestHeaders(t *testing.T) {
	now := time.Unix(1700000000, 999e6)
	u, _ := url.Parse("http://gw/v1/pay?z=26&a=q")
	h, err := Headers("app-1", "s3cr3t", "POST", u, "a=q&msg=hi+there", now, "n1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"X-App-Key":   "app-1",
		"X-Timestamp": "1700000000",
		"X-Nonce":     "n1",
		"X-Sign":      hmacHex("s3cr3t", "aqmsghi therez26timestamp1700000000noncen1"),
	}
	if len(h) != len(want) {
		t.Errorf("Headers = %v; want exactly %v", h, want)
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s = %q; want %q", k, got, v)
		}
	}

	if _, err := Headers("app-1", "s3cr3t", "GET", u, "a=1", now, "n1"); err != ErrFormMethod {
		t.Errorf("GET with a form: %v; want ErrFormMethod", err)
	}
	if _, err := Headers("app-1", "s3cr3t", "GET", &url.URL{RawQuery: "a=%zz"}, "", now, "n1"); !errors.Is(err, ErrEncoding) {
		t.Errorf("bad query: %v; want ErrEncoding", err)
	}
	if _, err := Headers("app-1", "s3cr3t", "POST", u, "a=form", now, "n1"); !errors.Is(err, ErrRepeated) {
		t.Errorf("a form value that differs from the query's: %v; want ErrRepeated", err)
	}
	h, err = Headers("app-1", "s3cr3t", "GET", nil, "", time.Time{}, "")
	if err != nil || len(h.Get(HeaderNonce)) != 32 || h.Get(HeaderTimestamp) == "" {
		t.Errorf("defaults: %v, %v", h, err)
	}
}

// TestSignRequestRoundTrip signs net/http requests and verifies them in a
// server the way the gateway does: query and form bytes into a Verifier.
func TestSignRequestRoundTrip(t *testing.T) {
	const secret = "s3cr3t"
	v := NewVerifier()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var form []byte
		if IsForm(r.Method, r.Header.Get("Content-Type")) {
			form = body
		}
		err := v.Verify([]byte(secret), []byte(r.URL.RawQuery), form,
			[]byte(r.Header.Get(HeaderTimestamp)), []byte(r.Header.Get(HeaderNonce)), []byte(r.Header.Get(HeaderSign)))
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		w.Write(body)
	}))
	defer srv.Close()

	cases := []struct {
		method, query, ct, body string
	}{
		{"GET", "b=2&a=x+y&%E5%90%8D=%E5%80%BC", "", ""},
		{"POST", "a=q", "application/x-www-form-urlencoded; charset=UTF-8", "a=q&note=gift+wrap&x=%F0%9F%98%80"},
		{"POST", "a=q", "application/json", `{"a":"json is not signed"}`},
		{"PUT", "", "application/x-www-form-urlencoded", "a=put+bodies+are+not+signed"},
	}
	for _, tc := range cases {
		req, err := http.NewRequest(tc.method, srv.URL+"/p?"+tc.query, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if tc.ct != "" {
			req.Header.Set("Content-Type", tc.ct)
		}
		if err := SignRequest(req, "app-1", secret, time.Time{}, ""); err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.query, err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(got) != tc.body {
			t.Errorf("%s ?%s %q: %d %q", tc.method, tc.query, tc.body, resp.StatusCode, got)
		}
	}

	// A tampered form body fails.
	req, _ := http.NewRequest("POST", srv.URL+"/p", strings.NewReader("amount=1"))
	req.Header.Set("Content-Type", FormContentType)
	if err := SignRequest(req, "app-1", secret, time.Time{}, ""); err != nil {
		t.Fatal(err)
	}
	req.Body = io.NopCloser(strings.NewReader("amount=1000"))
	req.ContentLength = int64(len("amount=1000"))
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("tampered body: status %d; want 401", resp.StatusCode)
	}
}

func TestSignRequestTooLarge(t *testing.T) {
	req, _ := http.NewRequest("POST", "http://gw/p", strings.NewReader("a="+strings.Repeat("x", MaxInput)))
	req.Header.Set("Content-Type", FormContentType)
	if err := SignRequest(req, "app-1", "k", time.Time{}, ""); err != ErrTooLarge {
		t.Errorf("SignRequest = %v; want ErrTooLarge", err)
	}
}
