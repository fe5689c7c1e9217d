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
