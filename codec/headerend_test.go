package codec

import (
	"bufio"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

func TestHdrEndVerdicts(t *testing.T) {
	cases := []struct {
		name, in string
		want     uint8
	}{
		{"CRLF", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", hdrCRLF},
		{"CRLF then body", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\na\n\nb", hdrCRLF},
		{"no fields", "GET / HTTP/1.0\r\n\r\n", hdrCRLF},
		{"bare LF line inside", "GET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\n", hdrCRLF},
		{"bare LF request line", "GET / HTTP/1.1\nHost: a\r\n\r\n", hdrCRLF},
		{"leading empty lines", "\r\n\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", hdrCRLF},
		{"all bare LF", "GET / HTTP/1.1\nHost: a\n\n", hdrBareLF},
		{"bare LF blank line", "GET / HTTP/1.1\r\nHost: a\r\n\n", hdrBareLF},
		{"bare LF before CRLF blank line", "GET / HTTP/1.1\r\nHost: a\n\r\n", hdrBareLF},
		{"bare LF, no fields", "GET / HTTP/1.0\n\n", hdrBareLF},
		{"first blank line decides", "GET / HTTP/1.1\r\nHost: a\n\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", hdrBareLF},
		{"unfinished", "GET / HTTP/1.1\r\nHost: a\r\n\r", hdrPending},
		{"unfinished, no blank line", "GET / HTTP/1.1\r\nHost: a\r\n", hdrPending},
		{"CR-only line is not blank", "GET / HTTP/1.1\r\nHost: a\r\n\r\r\n\r\n", hdrCRLF},
		{"folded line", "GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", hdrCRLF},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Whole, byte by byte, and split at every point: the verdict
			// never depends on how the bytes arrive.
			var s HeaderEnd
			s.Start(1 << 20)
			s.Feed([]byte(tc.in))
			if s.verdict != tc.want {
				t.Fatalf("whole: verdict %d, want %d", s.verdict, tc.want)
			}
			s.Start(1 << 20)
			for i := range len(tc.in) {
				s.Feed([]byte(tc.in[i : i+1]))
			}
			if s.verdict != tc.want {
				t.Fatalf("byte by byte: verdict %d, want %d", s.verdict, tc.want)
			}
			for cut := range len(tc.in) {
				s.Start(1 << 20)
				s.Feed([]byte(tc.in[:cut]))
				s.Feed([]byte(tc.in[cut:]))
				if s.verdict != tc.want {
					t.Fatalf("split at %d: verdict %d, want %d", cut, s.verdict, tc.want)
				}
			}
		})
	}
}

// The scanner and fasthttp agree on where a section ends: whenever fasthttp
// parses a header, the scanner's verdict is in, and it is hdrBareLF exactly
// when the raw section does not end in CRLF CRLF.
func TestHdrEndAgreesWithFasthttp(t *testing.T) {
	inputs := []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\n\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\n\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
	}
	for _, in := range inputs {
		var h fasthttp.RequestHeader
		if err := h.Read(bufio.NewReader(strings.NewReader(in))); err != nil {
			t.Fatalf("%q: fasthttp: %v", in, err)
		}
		var s HeaderEnd
		s.Start(1 << 20)
		s.Feed([]byte(in))
		if s.verdict == hdrPending || s.verdict == hdrUnknown {
			t.Fatalf("%q: fasthttp parsed it, the scanner has no verdict", in)
		}
		if s.Bad() != EndsBadly(&h) {
			t.Fatalf("%q: scanner bad=%v, raw section %q", in, s.Bad(), h.RawHeaders())
		}
	}
}

// After joining a stream mid-way, a blank line that may end a section split
// around the join is not held against the client.
func TestHdrEndResume(t *testing.T) {
	cases := []struct {
		name, tail, in string
		want           uint8
	}{
		{"next request", "\r\n\r\n", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", hdrCRLF},
		{"next request, bare LF", "\r\n\r\n", "GET / HTTP/1.1\nHost: a\n\n", hdrBareLF},
		{"CRLF CRLF split at the join", "a\r\n", "\r\nbody\n\nmore", hdrUnknown},
		{"CRLF CRLF split inside its CRLF", "a\r\n\r", "\nbody\n\nmore", hdrUnknown},
		{"stray CRLF before a request", "ok\r\n", "\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", hdrUnknown},
		{"mid-line", "Hos", "t: a\r\n\r\n", hdrCRLF},
		{"mid-line, bare LF", "Hos", "t: a\n\n", hdrBareLF},
		{"nothing seen", "", "GET / HTTP/1.1\nHost: a\n\n", hdrBareLF},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s HeaderEnd
			s.Resume(1<<20, []byte(tc.tail))
			s.Feed([]byte(tc.in))
			if s.verdict != tc.want {
				t.Fatalf("verdict %d, want %d", s.verdict, tc.want)
			}
		})
	}
}

func TestHdrEndGivesUpAtLimit(t *testing.T) {
	var s HeaderEnd
	s.Start(64)
	s.Feed([]byte("GET / HTTP/1.1\r\nX: " + strings.Repeat("a", 100) + "\n\n"))
	if s.verdict != hdrUnknown {
		t.Fatalf("verdict %d after the limit, want unknown", s.verdict)
	}
}
