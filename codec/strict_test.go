package codec

import (
	"bufio"
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

var testLimits = Limits{MaxHeaderBytes: 8192, MaxURIBytes: 8192, MaxBodyBytes: 8 << 20}

// parse reads raw the way the transports do (fasthttp header parse, raw
// headers kept) and applies Check. It returns the first error either gives.
func parse(raw string) error {
	var req fasthttp.Request
	req.Header.DisableNormalizing()
	br := bufio.NewReaderSize(strings.NewReader(raw), 16<<10)
	if err := req.Header.Read(br); err != nil {
		return err
	}
	return Check(&req.Header, &testLimits)
}

func TestCheckRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  string
		want error // nil = any error is fine (fasthttp refused first)
	}{
		{"CL and TE", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", ErrCLAndTE},
		{"TE then CL", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", ErrCLAndTE},
		{"conflicting CL", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", nil},
		{"repeated equal CL", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", nil},
		{"CL list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n", nil},
		{"CL sign", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", nil},
		{"CL negative", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", nil},
		{"CL hex", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\n", nil},
		{"CL empty", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \r\n\r\n", nil},
		{"TE gzip", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", nil},
		{"TE chunked not final", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", nil},
		{"TE gzip, chunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", nil},
		{"TE identity", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n", nil},
		{"TE twice", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", nil},
		{"TE xchunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n", nil},
		{"TE in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", nil},
		{"space before colon", "GET / HTTP/1.1\r\nHost: a\r\nContent-Length : 0\r\n\r\n", nil},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n", nil},
		{"obs-fold tab", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n\tc\r\n\r\n", nil},
		{"NUL in value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x00c\r\n\r\n", nil},
		{"CR in value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\rc\r\n\r\n", nil},
		{"ctl in value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x01c\r\n\r\n", nil},
		{"DEL in value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x7fc\r\n\r\n", nil},
		{"bad name", "GET / HTTP/1.1\r\nHost: a\r\nX(A): b\r\n\r\n", nil},
		{"no colon", "GET / HTTP/1.1\r\nHost: a\r\nnocolon\r\n\r\n", nil},
		{"bad method", "G@T / HTTP/1.1\r\nHost: a\r\n\r\n", nil},
		{"lower method", "get / HTTP/1.1\r\nHost: a\r\n\r\n", nil},
		{"CONNECT", "CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n", nil},
		{"TRACE", "TRACE / HTTP/1.1\r\nHost: a\r\n\r\n", ErrMethodNotAllowed},
		{"HTTP/2.0", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", nil},
		{"HTTP/1.2", "GET / HTTP/1.2\r\nHost: a\r\n\r\n", nil},
		{"http/1.1 lower", "GET / http/1.1\r\nHost: a\r\n\r\n", nil},
		{"HTTP/0.9", "GET /\r\n\r\n", nil},
		{"no host", "GET / HTTP/1.1\r\n\r\n", nil},
		{"two hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", nil},
		{"relative target", "GET foo HTTP/1.1\r\nHost: a\r\n\r\n", nil},
		{"star on GET", "GET * HTTP/1.1\r\nHost: a\r\n\r\n", nil},
		{"extra space", "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", nil},
		{"ctl in target", "GET /a\x01b HTTP/1.1\r\nHost: a\r\n\r\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := parse(tc.raw)
			if err == nil {
				t.Fatalf("accepted %q", tc.raw)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if st := Status(err); st != 400 && st != 405 {
				t.Fatalf("status %d for %v, want 400 or 405", st, err)
			}
		})
	}
}

func TestCheckAccepts(t *testing.T) {
	for _, raw := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /a?b=c HTTP/1.1\r\nHost: a.example.com:8080\r\nUser-Agent: x\r\nAccept: */*\r\n\r\n",
		"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
		"POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n",
		"GET / HTTP/1.0\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET http://a/b HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX-Tab: a\tb\r\nX-Utf8: \xc3\xa9\r\nX-Empty:\r\n\r\n",
		"DELETE /x HTTP/1.1\r\nHost: a\r\n\r\n",
	} {
		if err := parse(raw); err != nil {
			t.Errorf("refused %q: %v", raw, err)
		}
	}
}

func TestCheckLimits(t *testing.T) {
	lim := Limits{MaxHeaderBytes: 1024, MaxURIBytes: 300, MaxBodyBytes: 100}
	var req fasthttp.Request
	check := func(raw string) error {
		req.Reset()
		if err := req.Header.Read(bufio.NewReaderSize(strings.NewReader(raw), 64<<10)); err != nil {
			return err
		}
		return Check(&req.Header, &lim)
	}
	long := "GET /" + strings.Repeat("a", 400) + " HTTP/1.1\r\nHost: a\r\n\r\n"
	if err := check(long); Status(err) != 414 {
		t.Fatalf("long URI: %v (status %d), want 414", err, Status(err))
	}
	big := "GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("b", 2000) + "\r\n\r\n"
	if err := check(big); Status(err) != 431 {
		t.Fatalf("big header: %v, want 431", err)
	}
	body := "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 101\r\n\r\n"
	if err := check(body); Status(err) != 413 {
		t.Fatalf("big body: %v, want 413", err)
	}
}

// typicalRequest is what an API client sends.
var typicalRequest = []byte("POST /api/order/create?channel=app&v=2 HTTP/1.1\r\n" +
	"Host: api.example.com\r\n" +
	"User-Agent: okhttp/4.9.3\r\n" +
	"Accept: application/json\r\n" +
	"Content-Type: application/x-www-form-urlencoded\r\n" +
	"X-App-Key: demo-app\r\n" +
	"X-Timestamp: 1764400000\r\n" +
	"X-Nonce: 5f2b8c1e9a7d4c3b\r\n" +
	"X-Sign: 3a7bd3e2360a3d29eea436fcfb7e44c735d117c42d1c1835420b6b9942dd4f1b\r\n" +
	"Content-Length: 27\r\n" +
	"\r\n" +
	"merchant_id=42&amount=10000")

// parseTypical is the transports' work for one request: header, body, and
// the edge checks, on reused objects.
func parseTypical(req *fasthttp.Request, br *bufio.Reader, src *bytes.Reader) error {
	src.Reset(typicalRequest)
	br.Reset(src)
	req.Reset()
	req.Header.DisableNormalizing()
	if err := req.Header.Read(br); err != nil {
		return err
	}
	if err := req.ContinueReadBody(br, 1<<20, false); err != nil {
		return err
	}
	return Check(&req.Header, &testLimits)
}

func BenchmarkParseTypical(b *testing.B) {
	var req fasthttp.Request
	src := bytes.NewReader(typicalRequest)
	br := bufio.NewReaderSize(src, 16<<10)
	b.ReportAllocs()
	b.SetBytes(int64(len(typicalRequest)))
	for b.Loop() {
		if err := parseTypical(&req, br, src); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStripResponseHopByHop: an upstream's hop-by-hop fields, and those it
// names in Connection, do not reach the client; the others do.
func TestStripResponseHopByHop(t *testing.T) {
	var r fasthttp.Response
	raw := "HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\nKeep-Alive: timeout=5\r\n" +
		"Proxy-Authenticate: Basic\r\nProxy-Connection: keep-alive\r\nUpgrade: h2c\r\nTE: trailers\r\n" +
		"Content-Type: text/plain\r\nX-Kept: yes\r\nContent-Length: 2\r\n\r\nok"
	if err := r.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	StripResponseHopByHop(&r.Header)
	for _, k := range []string{"Connection", "X-Secret", "Keep-Alive", "Proxy-Authenticate", "Proxy-Connection", "Upgrade", "TE"} {
		if v := r.Header.Peek(k); len(v) > 0 {
			t.Fatalf("%s: %s survived", k, v)
		}
	}
	if string(r.Header.Peek("X-Kept")) != "yes" || string(r.Header.ContentType()) != "text/plain" {
		t.Fatalf("kept fields lost:\n%s", r.Header.Header())
	}

	var plain fasthttp.Response
	plain.Header.Set("X-A", "1")
	plain.Header.Set("Cache-Control", "no-store")
	before := string(plain.Header.Header())
	StripResponseHopByHop(&plain.Header)
	if after := string(plain.Header.Header()); after != before {
		t.Fatalf("an answer without hop-by-hop fields changed:\n%s\n%s", before, after)
	}
}

// TestPlainValueIsTheTable holds the word-at-a-time check to the byte
// table: every byte value at every position of values of every length up
// to three words, among plain neighbours of every kind.
func TestPlainValueIsTheTable(t *testing.T) {
	neighbours := []byte{' ', 'a', '~', 0x80, 0xff, 0x21, 0x7e}
	for n := 1; n <= 24; n++ {
		for pos := 0; pos < n; pos++ {
			for c := 0; c < 256; c++ {
				v := make([]byte, n)
				for i := range v {
					v[i] = neighbours[(i+c)%len(neighbours)]
				}
				v[pos] = byte(c)
				want := c >= 0x20 && c != 0x7f
				if got := plainValue(v); got != want {
					t.Fatalf("plainValue(%q) = %v, want %v", v, got, want)
				}
			}
		}
	}
}
