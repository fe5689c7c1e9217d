package codec

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http/httputil"
	"strings"
	"testing"
)

func decodeChunked(in string, limit int64) (string, error) {
	var b Body
	b.StartChunked(bufio.NewReaderSize(strings.NewReader(in), 4096), limit, 1024)
	out, err := io.ReadAll(&b)
	return string(out), err
}

func TestChunkedDecoder(t *testing.T) {
	ok := []struct{ in, want string }{
		{"0\r\n\r\n", ""},
		{"3\r\nabc\r\n0\r\n\r\n", "abc"},
		{"3;ext=1\r\nabc\r\n2 ; x\r\nde\r\n0\r\n\r\n", "abcde"},
		{"A\r\n0123456789\r\n0\r\n\r\n", "0123456789"},
		{"a\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n", "0123456789"},
		{"0003\r\nabc\r\n0\r\n\r\n", "abc"},
	}
	for _, c := range ok {
		got, err := decodeChunked(c.in, 0)
		if err != nil || got != c.want {
			t.Errorf("%q → %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	bad := []string{
		"", "3\r\nab", "3\r\nabcX\r\n0\r\n\r\n", "3\nabc\r\n0\r\n\r\n", "3\r\nabc\r\n0\n\n",
		"-3\r\nabc\r\n0\r\n\r\n", "+3\r\nabc\r\n0\r\n\r\n", "0x3\r\nabc\r\n0\r\n\r\n", " 3\r\nabc\r\n0\r\n\r\n",
		"g\r\n", "\r\n", "3;\x00\r\nabc\r\n0\r\n\r\n", "fffffffffffffffff\r\n", "3\r\nabc\r\n0\r\n bad trailer\r\n\r\n",
		"3\r\nabc\r\n0\r\nX:" + strings.Repeat("v", 2000) + "\r\n\r\n", "3\r\nabc\r\n",
	}
	for _, in := range bad {
		if got, err := decodeChunked(in, 0); err == nil {
			t.Errorf("%q accepted as %q", in, got)
		}
	}
	if _, err := decodeChunked("5\r\nabcde\r\n5\r\nfghij\r\n0\r\n\r\n", 8); !errors.Is(err, ErrBodyTooLarge) {
		t.Errorf("over the limit: %v", err)
	}
}

func TestFixedBodyAndDiscard(t *testing.T) {
	br := bufio.NewReader(strings.NewReader("abcdefGET / HTTP/1.1"))
	var b Body
	b.StartFixed(br, 6)
	if out, err := io.ReadAll(&b); err != nil || string(out) != "abcdef" {
		t.Fatalf("%q %v", out, err)
	}
	rest, _ := io.ReadAll(br)
	if string(rest) != "GET / HTTP/1.1" {
		t.Fatalf("the body read past its end: %q left", rest)
	}
	br = bufio.NewReader(strings.NewReader("5\r\nabcde\r\n0\r\n\r\nNEXT"))
	b.StartChunked(br, 0, 1024)
	if !b.Discard(100) {
		t.Fatal("discard of a small chunked body failed")
	}
	if rest, _ := io.ReadAll(br); string(rest) != "NEXT" {
		t.Fatalf("after discard: %q", rest)
	}
	b.StartFixed(bufio.NewReader(strings.NewReader(strings.Repeat("x", 100))), 100)
	if b.Discard(10) {
		t.Fatal("discarded more than the limit")
	}
}

// FuzzChunked is differential: whatever the decoder accepts, Go's own
// chunked reader decodes to the same bytes and ends at the same place. The
// decoder may refuse more (bare LF, odd sizes), never accept differently.
func FuzzChunked(f *testing.F) {
	for _, s := range []string{"3\r\nabc\r\n0\r\n\r\n", "a;x=y\r\n0123456789\r\n0\r\nT: 1\r\n\r\n", "0\r\n\r\n", "3\nabc\n0\n\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var b Body
		br := bufio.NewReaderSize(bytes.NewReader(in), 4096)
		b.StartChunked(br, 1<<20, 4096)
		got, err := io.ReadAll(&b)
		if err != nil {
			return
		}
		// Our end: the bytes after the body.
		rest, _ := io.ReadAll(br)
		ref := httputil.NewChunkedReader(bytes.NewReader(in))
		want, rerr := io.ReadAll(ref)
		if rerr != nil {
			t.Fatalf("accepted %q as %q; Go's reader fails: %v", in, got, rerr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%q decodes to %q; Go's reader says %q", in, got, want)
		}
		// Go's reader stops after the last chunk's line; the trailer
		// section (which we consumed) is what remains there.
		if !bytes.HasSuffix(in, rest) {
			t.Fatalf("%q: the rest %q is not the input's tail", in, rest)
		}
	})
}
