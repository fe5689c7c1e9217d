package replay

import (
	"strings"
	"testing"
)

func TestBar(t *testing.T) {
	var out strings.Builder
	bar := Bar(&out)
	s := newSummary()
	s.Differing = 2
	bar(5, 10, s)
	bar(5, 10, s) // unchanged: not drawn again
	bar(10, 10, s)
	want := "\r[==============>               ] 5/10  2 differing, 0 errors " +
		"\r[==============================] 10/10  2 differing, 0 errors \n"
	if out.String() != want {
		t.Fatalf("got %q\nwant %q", out.String(), want)
	}
}
