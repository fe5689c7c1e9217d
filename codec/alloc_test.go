//go:build !race

package codec

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestParseAllocs is the gate for the edge parser: parsing and checking a
// typical request on reused objects must not allocate.
func TestParseAllocs(t *testing.T) {
	var req fasthttp.Request
	src := bytes.NewReader(typicalRequest)
	br := bufio.NewReaderSize(src, 16<<10)
	if err := parseTypical(&req, br, src); err != nil {
		t.Fatal(err)
	}
	n := testing.AllocsPerRun(200, func() {
		if err := parseTypical(&req, br, src); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("parsing a typical request allocates %.1f times, want 0", n)
	}
}

// TestCookieAllocs: reading a cookie the raw way allocates nothing.
func TestCookieAllocs(t *testing.T) {
	var req fasthttp.Request
	raw := "GET / HTTP/1.1\r\nHost: a\r\nCookie: sid=s1; lang=zh\r\n\r\n"
	if err := req.Read(bufio.NewReader(bytes.NewReader([]byte(raw)))); err != nil {
		t.Fatal(err)
	}
	name := []byte("lang")
	if n := testing.AllocsPerRun(100, func() { Cookie(&req.Header, name) }); n != 0 {
		t.Fatalf("Cookie allocates %.1f times", n)
	}
}
