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

// sha256("") in hex: the body digest of a request without a body.
const emptyDigest = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// v2Vectors are written by hand from the rules in the package
// documentation. Each signature was computed outside Go, with the string
// as printf arguments, e.g. for the first:
//
//	printf 'tollgate-sign-v2\nGET\n/v1/order\na=x%%20y&b=2\n1700000000\nn1\n%s' \
//	  "$(printf '' | openssl dgst -sha256 | awk '{print $2}')" |
//	  openssl dgst -sha256 -hmac s3cr3t
var v2Vectors = []struct {
	name string
	req  Request
	want string // the signing string
	sig  string // HMAC-SHA256 under "s3cr3t"
}{
	{
		name: "query sorted and escaped",
		req:  Request{Method: "GET", Path: "/v1/order", Query: "b=2&a=x+y", Timestamp: "1700000000", Nonce: "n1"},
		want: "tollgate-sign-v2\nGET\n/v1/order\na=x%20y&b=2\n1700000000\nn1\n" + emptyDigest,
		sig:  "3bdb9e9d3cc039318cdfb460aabf70c74ec7c9fbae8f01ab128772fc4508b68d",
	},
	// The pair v1 cannot tell apart: both are "a1b2..." there.
	{
		name: "two parameters",
		req:  Request{Method: "GET", Path: "/p", Query: "a=1&b=2", Timestamp: "1700000000", Nonce: "n1"},
		want: "tollgate-sign-v2\nGET\n/p\na=1&b=2\n1700000000\nn1\n" + emptyDigest,
		sig:  "4c40185fd1460350dea3a0b4171baf4df89d59b8a9e0509eb1085fa830cc944f",
	},
	{
		name: "one parameter holding the other",
		req:  Request{Method: "GET", Path: "/p", Query: "a=1b2", Timestamp: "1700000000", Nonce: "n1"},
		want: "tollgate-sign-v2\nGET\n/p\na=1b2\n1700000000\nn1\n" + emptyDigest,
		sig:  "1b8b73a1a34eb22d3b77c19b810e21938609a2f2204b18605cc98e93cfc5cd4a",
	},
	{
		name: "form POST: form parameters and the body digest",
		req: Request{Method: "POST", Path: "/api/pay", Query: "channel=app", ContentType: "application/x-www-form-urlencoded; charset=utf-8",
			Body: "amount=19.90&note=gift+wrap&to=%40bob", Timestamp: "1700000000", Nonce: "n1"},
		// sha256("amount=19.90&note=gift+wrap&to=%40bob")
		want: "tollgate-sign-v2\nPOST\n/api/pay\namount=19.90&channel=app&note=gift%20wrap&to=%40bob\n1700000000\nn1\n" +
			"32c3bed23e54a8fd671568216b8ce2fa1fc2edd07e0b023b3f2fb364cd939563",
		sig: "57da988f72f278d30fb544a75f2561411e094e844585b69c22558908a4d5b3ae",
	},
	{
		name: "JSON body, no parameters",
		req: Request{Method: "PUT", Path: "/api/orders/42", ContentType: "application/json",
			Body: `{"sku":"A/1","qty":2}`, Timestamp: "1700000000", Nonce: "n1"},
		// sha256(`{"sku":"A/1","qty":2}`)
		want: "tollgate-sign-v2\nPUT\n/api/orders/42\n\n1700000000\nn1\n" +
			"530957fcb7d3ae600c06af1a63f004b8f8fd0cc548062cbeb4b245b0281e461c",
		sig: "1d71769910a56e1774a544fc77ccaf2c0a088dfa3acbded71bbcce5e54ff34b5",
	},
	{
		name: "reserved characters in path, keys and values",
		req: Request{Method: "GET", Path: "/files/a%2Fb;v=1", Query: "q=%E5%90%8D&k%3D=v%26&t=~-._*",
			Timestamp: "1700000000", Nonce: "n1"},
		want: "tollgate-sign-v2\nGET\n/files/a%2Fb;v=1\nk%3D=v%26&q=%E5%90%8D&t=~-._%2A\n1700000000\nn1\n" + emptyDigest,
		sig:  "cb1c4ca520b63aa86092884eef3ed66b3aa21e079fdaa1dc31d589e843a7bfaa",
	},
}

func parts(r Request) *Parts {
	return &Parts{Method: []byte(r.Method), Path: []byte(r.Path), Query: []byte(r.Query), ContentType: []byte(r.ContentType),
		Body: []byte(r.Body), Timestamp: []byte(r.Timestamp), Nonce: []byte(r.Nonce)}
}

func TestSignV2Vectors(t *testing.T) {
	const secret = "s3cr3t"
	v := NewVerifier()
	for _, tc := range v2Vectors {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := StringToSignV2(tc.req); err != nil || got != tc.want {
				t.Errorf("StringToSignV2 = %q, %v; want %q", got, err, tc.want)
			}
			p := parts(tc.req)
			if got, err := v.AppendV2([]byte("prefix:"), p); err != nil || string(got) != "prefix:"+tc.want {
				t.Errorf("AppendV2 = %q, %v", got, err)
			}
			if got, err := SignV2(secret, tc.req); err != nil || got != tc.sig {
				t.Errorf("SignV2 = %q, %v; want %q", got, err, tc.sig)
			}
			if got, err := v.AppendSignatureV2(nil, []byte(secret), p); err != nil || string(got) != tc.sig {
				t.Errorf("AppendSignatureV2 = %q, %v; want %q", got, err, tc.sig)
			}
			if err := v.VerifyV2([]byte(secret), p, []byte(tc.sig)); err != nil {
				t.Errorf("VerifyV2 = %v", err)
			}
			if hmacHex(secret, tc.want) != tc.sig {
				t.Errorf("the vector's signature is not the HMAC of its string")
			}
			// Everything v2 signs is bound by the signature.
			for name, mod := range map[string]func(*Parts){
				"method":       func(p *Parts) { p.Method = []byte("DELETE") },
				"path":         func(p *Parts) { p.Path = append(p.Path, 'x') },
				"query":        func(p *Parts) { p.Query = append(p.Query, "&z=1"...) },
				"body":         func(p *Parts) { p.Body = append(p.Body, ' ') },
				"content type": func(p *Parts) { p.ContentType = []byte("text/plain") },
				"timestamp":    func(p *Parts) { p.Timestamp = []byte("1700000001") },
				"nonce":        func(p *Parts) { p.Nonce = []byte("n2") },
			} {
				q := parts(tc.req)
				mod(q)
				if name == "content type" && !IsForm(tc.req.Method, tc.req.ContentType) {
					continue // the type matters only by making the body a form
				}
				if err := v.VerifyV2([]byte(secret), q, []byte(tc.sig)); err == nil {
					t.Errorf("VerifyV2 accepted another %s", name)
				}
			}
			// A v1 verifier never accepts a v2 signature.
			if v.Check([]byte(secret), p.Query, nil, p.Timestamp, p.Nonce, []byte(tc.sig)) {
				t.Error("the v1 check accepted a v2 signature")
			}
		})
	}
}

func TestIsCanonicalPath(t *testing.T) {
	good := []string{"/", "/a", "/a/", "/a/b/c", "/a%2Fb", "/a%20b", "/%C3%A9t%C3%A9", "/a;v=1,2", "/~user/.profile",
		"/a/..b/.c/...", "/!$&'()*+,;=:@-._~", "/%25"}
	bad := []string{"", "a", "*", "//", "/a//b", "//a", "/.", "/./a", "/a/.", "/a/..", "/a/../b", "/a/%2e", "/a/%2E%2E",
		"/%41", "/a%7e", "/a%2f", "/a%", "/a%2", "/a%zz", "/a b", "/a?b", "/a#b", "/é", "/a|b", "/a\"b", "/a[0]", "/a\\b",
		"/a\x00", "/a\n"}
	for _, p := range good {
		if !IsCanonicalPath(p) || !IsCanonicalPath([]byte(p)) {
			t.Errorf("IsCanonicalPath(%q) = false", p)
		}
	}
	for _, p := range bad {
		if IsCanonicalPath(p) || IsCanonicalPath([]byte(p)) {
			t.Errorf("IsCanonicalPath(%q) = true", p)
		}
	}
}

func TestSignV2Errors(t *testing.T) {
	base := Request{Method: "GET", Path: "/p", Query: "a=1", Timestamp: "1700000000", Nonce: "n1"}
	cases := []struct {
		name string
		mod  func(*Request)
		want error
	}{
		{"dot segment", func(r *Request) { r.Path = "/a/../p" }, ErrPath},
		{"escaped unreserved", func(r *Request) { r.Path = "/%70" }, ErrPath},
		{"lowercase escape", func(r *Request) { r.Path = "/a%2fb" }, ErrPath},
		{"double slash", func(r *Request) { r.Path = "//p" }, ErrPath},
		{"relative", func(r *Request) { r.Path = "p" }, ErrPath},
		{"no method", func(r *Request) { r.Method = "" }, ErrField},
		{"method with space", func(r *Request) { r.Method = "G T" }, ErrField},
		{"no timestamp", func(r *Request) { r.Timestamp = "" }, ErrField},
		{"nonce with line break", func(r *Request) { r.Nonce = "n\n1" }, ErrField},
		{"repeated parameter", func(r *Request) { r.Query = "amount=1&amount=1000" }, ErrRepeated},
		{"form repeats query", func(r *Request) {
			r.Method, r.ContentType, r.Query, r.Body = "POST", FormContentType, "amount=1", "amount=1000"
		}, ErrRepeated},
		{"bad escape", func(r *Request) { r.Query = "a=%zz" }, ErrEncoding},
		{"too large", func(r *Request) { r.Query = "a=" + strings.Repeat("x", MaxInput) }, ErrTooLarge},
		{"too large path", func(r *Request) { r.Path = "/" + strings.Repeat("x", MaxInput) }, ErrTooLarge},
	}
	v := NewVerifier()
	sig := []byte(strings.Repeat("0", SignatureLen))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := base
			tc.mod(&r)
			if _, err := StringToSignV2(r); !errors.Is(err, tc.want) {
				t.Errorf("StringToSignV2 error = %v; want %v", err, tc.want)
			}
			if _, err := SignV2("k", r); !errors.Is(err, tc.want) {
				t.Errorf("SignV2 error = %v; want %v", err, tc.want)
			}
			if b, err := v.AppendV2([]byte("x"), parts(r)); err != tc.want || string(b) != "x" {
				t.Errorf("AppendV2 = %q, %v; want %v", b, err, tc.want)
			}
			if err := v.VerifyV2([]byte("k"), parts(r), sig); err != tc.want {
				t.Errorf("VerifyV2 error = %v; want %v", err, tc.want)
			}
		})
	}
	// A body that is not a form is not parsed: a JSON body with '&' and
	// '=' adds no parameters.
	r := base
	r.Method, r.ContentType, r.Body = "POST", "application/json", `{"a":"1&a=2"}`
	if _, err := StringToSignV2(r); err != nil {
		t.Errorf("JSON body: %v", err)
	}
}

func TestRepeatedKey(t *testing.T) {
	v := NewVerifier()
	if key, cut := v.RepeatedKey(); key != nil || cut {
		t.Fatalf("fresh verifier: %q %v", key, cut)
	}
	long := strings.Repeat("k", MaxRepeatedKey-1) + "é" // é straddles the limit
	for _, tc := range []struct {
		query, form string
		key         string
		cut         bool
	}{
		{"amount=1&amount=1000", "", "amount", false},
		{"b=1&a=1&b=2&a=2", "", "a", false}, // the first in signing order
		{"%E5%90%8D=1", "%E5%90%8D=2", "名", false},
		{"k%22%0A=1&k%22%0A=2", "", "k\"\n", false},
		{url.QueryEscape(long) + "=1&" + url.QueryEscape(long) + "=2", "", long[:MaxRepeatedKey-1], true},
	} {
		if _, err := v.Append(nil, []byte(tc.query), []byte(tc.form), nil, nil); err != ErrRepeated {
			t.Fatalf("%q %q: %v", tc.query, tc.form, err)
		}
		if key, cut := v.RepeatedKey(); string(key) != tc.key || cut != tc.cut {
			t.Errorf("%q %q: RepeatedKey = %q, %v; want %q, %v", tc.query, tc.form, key, cut, tc.key, tc.cut)
		}
	}
	// Any other outcome forgets it.
	if err := v.Verify([]byte("k"), []byte("a=1"), nil, nil, nil, make([]byte, SignatureLen)); err != ErrSignature {
		t.Fatal(err)
	}
	if key, cut := v.RepeatedKey(); key != nil || cut {
		t.Errorf("after another error: %q %v", key, cut)
	}
}

func TestHeadersV2(t *testing.T) {
	u, _ := url.Parse("http://gw/v1/order?b=2&a=x+y")
	h, err := HeadersV2("app-1", "s3cr3t", "GET", u, "", "", time.Unix(1700000000, 0), "n1")
	if err != nil {
		t.Fatal(err)
	}
	if h.Get(HeaderSign) != v2Vectors[0].sig || h.Get(HeaderTimestamp) != "1700000000" || h.Get(HeaderNonce) != "n1" || h.Get(HeaderAppKey) != "app-1" {
		t.Errorf("HeadersV2 = %v; want X-Sign %s", h, v2Vectors[0].sig)
	}
	for _, raw := range []string{"http://gw/a/../b", "http://gw/%7Euser", "http://gw//x", "http://gw/a%2fb"} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := HeadersV2("app-1", "s3cr3t", "GET", u, "", "", time.Time{}, ""); !errors.Is(err, ErrPath) {
			t.Errorf("%s: %v; want ErrPath", raw, err)
		}
	}
	// An empty path is sent, and signed, as "/".
	h, err = HeadersV2("app-1", "s3cr3t", "GET", &url.URL{Scheme: "http", Host: "gw"}, "", "", time.Unix(1700000000, 0), "n1")
	want, _ := SignV2("s3cr3t", Request{Method: "GET", Path: "/", Timestamp: "1700000000", Nonce: "n1"})
	if err != nil || h.Get(HeaderSign) != want {
		t.Errorf("empty path: %v %v", h, err)
	}
}

// TestSignRequestV2RoundTrip signs net/http requests and verifies them in a
// server from what arrived on the wire: the request-target's path as sent.
func TestSignRequestV2RoundTrip(t *testing.T) {
	const secret = "s3cr3t"
	v := NewVerifier()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		path, query, _ := strings.Cut(r.RequestURI, "?")
		err := v.VerifyV2([]byte(secret), &Parts{
			Method: []byte(r.Method), Path: []byte(path), Query: []byte(query),
			ContentType: []byte(r.Header.Get("Content-Type")), Body: body,
			Timestamp: []byte(r.Header.Get(HeaderTimestamp)), Nonce: []byte(r.Header.Get(HeaderNonce)),
		}, []byte(r.Header.Get(HeaderSign)))
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		w.Write(body)
	}))
	defer srv.Close()

	cases := []struct {
		method, target, ct, body string
	}{
		{"GET", "/v1/order?b=2&a=x+y&%E5%90%8D=%E5%80%BC", "", ""},
		{"GET", "/files/a%2Fb;v=1/%C3%A9", "", ""},
		{"POST", "/pay?a=q", "application/x-www-form-urlencoded; charset=UTF-8", "a=q&note=gift+wrap"},
		{"POST", "/orders", "application/json", `{"amount":"19.90"}`},
		{"PUT", "/orders/42", "application/x-www-form-urlencoded", "a=put+bodies+are+signed+by+digest"},
		{"DELETE", "/orders/42", "", ""},
	}
	for _, tc := range cases {
		req, err := http.NewRequest(tc.method, srv.URL+tc.target, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if tc.ct != "" {
			req.Header.Set("Content-Type", tc.ct)
		}
		if err := SignRequestV2(req, "app-1", secret, time.Time{}, ""); err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.target, err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(got) != tc.body {
			t.Errorf("%s %s %q: %d %q", tc.method, tc.target, tc.body, resp.StatusCode, got)
		}
	}

	// A changed JSON body fails: v1 would not have noticed.
	req, _ := http.NewRequest("POST", srv.URL+"/orders", strings.NewReader(`{"amount":"1"}`))
	req.Header.Set("Content-Type", "application/json")
	if err := SignRequestV2(req, "app-1", secret, time.Time{}, ""); err != nil {
		t.Fatal(err)
	}
	req.Body = io.NopCloser(strings.NewReader(`{"amount":"1000"}`))
	req.ContentLength = int64(len(`{"amount":"1000"}`))
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("tampered JSON body: status %d; want 401", resp.StatusCode)
	}
}

// FuzzAgreeV2 checks that the client functions and the Verifier agree on
// any input for scheme v2, as FuzzAgree does for v1.
func FuzzAgreeV2(f *testing.F) {
	for _, tc := range v2Vectors {
		r := tc.req
		f.Add(r.Method, r.Path, r.Query, r.ContentType, r.Body, r.Timestamp, r.Nonce, "k")
	}
	f.Add("GET", "/a/../b", "a=1", "", "", "1", "n", "k")
	f.Add("POST", "/p", "a=1", FormContentType, "a=2", "1", "n", "k")
	f.Add("POST", "/p%2F", "a=%zz", FormContentType, "a=2", "1", "n", "")
	v := NewVerifier()
	f.Fuzz(func(t *testing.T, method, path, query, ct, body, ts, nonce, secret string) {
		r := Request{Method: method, Path: path, Query: query, ContentType: ct, Body: body, Timestamp: ts, Nonce: nonce}
		want, werr := StringToSignV2(r)
		got, gerr := v.AppendV2(nil, parts(r))
		if werr != nil || gerr != nil {
			if gerr == nil || !errors.Is(werr, gerr) {
				t.Fatalf("errors differ: client %v, verifier %v", werr, gerr)
			}
			if v.VerifyV2([]byte(secret), parts(r), make([]byte, SignatureLen)) == nil {
				t.Fatal("VerifyV2 accepted unusable input")
			}
			return
		}
		if string(got) != want {
			t.Fatalf("signing strings differ:\nclient   %q\nverifier %q", want, got)
		}
		sig, err := SignV2(secret, r)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.VerifyV2([]byte(secret), parts(r), []byte(sig)); err != nil {
			t.Fatalf("VerifyV2(SignV2(...)) = %v", err)
		}
	})
}
