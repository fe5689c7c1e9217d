package codec

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

func readHeader(t *testing.T, h *fasthttp.RequestHeader, raw string) {
	t.Helper()
	if err := h.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
}

// TestReceivedIsTheSection holds the index to a reading of the section
// itself, over random sections: the same fields in the same order with the
// same bytes, the forwarded list built from either the same, and the trace
// fields the ones fasthttp's Peek finds (the first of each name).
func TestReceivedIsTheSection(t *testing.T) {
	lines := []string{
		"traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"TraceParent:  00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00 ",
		"X-Request-Id: abc-1", "x-request-id:\tdef-2", "X_Request_Id: ghi-3",
		"Accept: */*", "Cookie: a=1", "Connection: keep-alive, X-Hop", "X-Hop: 1",
		"X-Forwarded-For: 192.0.2.1", "User-Agent: wrk", "X-Empty:", "X-Blank: \t  ", "X-Tab: \ta\tb\t",
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var (
		r         Received
		got, want FieldList
	)
	for range 3000 {
		n := rng.IntN(9)
		picked := make([]string, 0, n)
		for range n {
			picked = append(picked, lines[rng.IntN(len(lines))])
		}
		raw := "GET / HTTP/1.1\r\nHost: api.example.com\r\n" + strings.Join(picked, "\r\n")
		if n > 0 {
			raw += "\r\n"
		}
		raw += "\r\n"
		var req fasthttp.Request
		readHeader(t, &req.Header, raw)
		if err := r.Check(&req.Header, &testLimits); err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		if !r.indexes(&req.Header) {
			t.Fatalf("%q: not indexed after Check", raw)
		}
		i := 0
		for k, v := range Fields(&req.Header) {
			if i >= len(r.fields) {
				t.Fatalf("%q: the index has %d fields, the section more", raw, len(r.fields))
			}
			if rk, rv := r.field(i); !bytes.Equal(rk, k) || !bytes.Equal(rv, v) {
				t.Fatalf("%q: field %d is %q: %q in the index, %q: %q in the section", raw, i, rk, rv, k, v)
			}
			i++
		}
		if i != len(r.fields) {
			t.Fatalf("%q: the index has %d fields, the section %d", raw, len(r.fields), i)
		}
		for name, got := range map[string][]byte{"traceparent": r.Peek(&req.Header, "traceparent"), "X-Request-Id": r.Peek(&req.Header, "X-Request-Id"), "x-hop": r.Peek(&req.Header, "x-hop")} {
			if want := req.Header.Peek(name); !bytes.Equal(got, want) {
				t.Fatalf("%q: %s is %q from the index, %q from Peek", raw, name, got, want)
			}
		}
		o := Outgoing{
			Host: []byte("api.example.com"), ClientHost: []byte("api.example.com"),
			Peer: netip.MustParseAddr("10.0.0.9"), Client: netip.MustParseAddr("10.0.0.9"),
			PeerTrusted: true,
		}
		CollectFields(&want, &req.Header, &o)
		o.Received = &r
		CollectFields(&got, &req.Header, &o)
		if listString(&got) != listString(&want) {
			t.Fatalf("request %q:\nfrom the index:\n%sfrom the section:\n%s", raw, listString(&got), listString(&want))
		}
	}
}

// TestReceivedIsForItsOwnSection: an index is used only for the section it
// was taken from. Another request's section, even of the same length, or
// a section whose check failed, is read from the header itself.
func TestReceivedIsForItsOwnSection(t *testing.T) {
	const (
		a = "GET / HTTP/1.1\r\nHost: a\r\ntraceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\n\r\n"
		b = "GET / HTTP/1.1\r\nHost: a\r\ntraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n\r\n"
	)
	var r Received
	var ra, rb fasthttp.Request
	readHeader(t, &ra.Header, a)
	readHeader(t, &rb.Header, b)
	if err := r.Check(&ra.Header, &testLimits); err != nil {
		t.Fatal(err)
	}
	if got, want := r.Peek(&rb.Header, "traceparent"), rb.Header.Peek("traceparent"); !bytes.Equal(got, want) {
		t.Fatalf("another request's traceparent: %q, want %q", got, want)
	}
	r.Reset()
	if r.indexes(&ra.Header) {
		t.Fatal("a reset index still indexes its section")
	}
	// The same header read again (the same buffer, perhaps the same
	// length): only a new check indexes it.
	readHeader(t, &ra.Header, b)
	if got, want := r.Peek(&ra.Header, "traceparent"), ra.Header.Peek("traceparent"); !bytes.Equal(got, want) {
		t.Fatalf("after a new read: %q, want %q", got, want)
	}
	var bad fasthttp.Request
	readHeader(t, &bad.Header, "GET / HTTP/1.1\r\nHost: a\r\nContent-Type: a\r\nContent-Type: b\r\nX-Request-Id: r1\r\n\r\n")
	if err := r.Check(&bad.Header, &testLimits); err == nil {
		t.Fatal("two Content-Type fields passed the check")
	}
	if r.indexes(&bad.Header) {
		t.Fatal("a refused section is indexed")
	}
	if got := r.Peek(&bad.Header, "X-Request-Id"); string(got) != "r1" {
		t.Fatalf("a refused request's X-Request-Id: %q, want r1 (read from the header)", got)
	}
}

// TestReceivedKeepsNoHugeIndex: a section of thousands of tiny fields is
// indexed whole, and its index is not kept past the request.
func TestReceivedKeepsNoHugeIndex(t *testing.T) {
	lim := Limits{MaxHeaderBytes: 64 << 10}
	raw := "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("a:\r\n", 3000) + "traceparent: x\r\n\r\n"
	var req fasthttp.Request
	if err := req.Header.Read(bufio.NewReaderSize(strings.NewReader(raw), 64<<10)); err != nil {
		t.Fatal(err)
	}
	var r Received
	if err := r.Check(&req.Header, &lim); err != nil {
		t.Fatal(err)
	}
	if len(r.fields) != 3002 || string(r.Peek(&req.Header, "traceparent")) != "x" {
		t.Fatalf("indexed %d fields, traceparent %q; want 3002 and x", len(r.fields), r.Peek(&req.Header, "traceparent"))
	}
	r.Reset()
	if cap(r.fields) > keptFields {
		t.Fatalf("the index keeps room for %d fields after Reset, want at most %d", cap(r.fields), keptFields)
	}
	var small fasthttp.Request
	readHeader(t, &small.Header, "GET / HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n")
	if err := r.Check(&small.Header, &lim); err != nil {
		t.Fatal(err)
	}
	r.Reset()
	if cap(r.fields) == 0 {
		t.Fatal("a small index's buffer was not kept")
	}
}
