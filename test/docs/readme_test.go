// Package docs tests that what the documentation shows does what it says.
package docs

import (
	"bytes"
	"net/http"
	"os"
	"strings"
	"testing"

	_ "github.com/tollgate/tollgate/features" // every built-in feature, as the binary has them
	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
)

// yamlBlockAfter returns the first ```yaml block of the Markdown text
// after the heading.
func yamlBlockAfter(t *testing.T, text []byte, heading string) string {
	t.Helper()
	i := bytes.Index(text, []byte("\n"+heading+"\n"))
	if i < 0 {
		t.Fatalf("no heading %q", heading)
	}
	rest := text[i:]
	start := bytes.Index(rest, []byte("```yaml\n"))
	if start < 0 {
		t.Fatalf("no yaml block after %q", heading)
	}
	rest = rest[start+len("```yaml\n"):]
	end := bytes.Index(rest, []byte("```"))
	if end < 0 {
		t.Fatalf("unterminated yaml block after %q", heading)
	}
	return string(rest[:end])
}

// TestReadme429: the README's block that turns rate-limit refusals into
// 429 does: the first request passes to the backend, the second within
// the minute is refused with 429 and Retry-After. The block's backend
// address is replaced by a real backend of the test's.
func TestReadme429(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := yamlBlockAfter(t, readme, "### Rate limits answer 911 and 919 unless told otherwise")
	if !strings.Contains(block, "127.0.0.1:9001") {
		t.Fatalf("the block's backend moved; update this test:\n%s", block)
	}
	up := testutil.StartRecordingUpstream(t)
	g := gatewaytest.Start(t, strings.Replace(block, "127.0.0.1:9001", up.Addr, 1), gatewaytest.Options{})

	get := func() (*http.Response, error) { return http.Get(g.URL("/api/order/1")) }
	first, err := get()
	if err != nil {
		t.Fatal(err)
	}
	first.Body.Close()
	if first.StatusCode != 200 {
		t.Fatalf("first request: %d, want 200 from the backend", first.StatusCode)
	}
	second, err := get()
	if err != nil {
		t.Fatal(err)
	}
	second.Body.Close()
	if second.StatusCode != http.StatusTooManyRequests || second.Header.Get("Retry-After") == "" {
		t.Fatalf("second request: %d (Retry-After %q), want 429 with Retry-After", second.StatusCode, second.Header.Get("Retry-After"))
	}

	// Without the status line, the same limit answers 911: what the
	// README says happens by default.
	plain := strings.Replace(block, "status: {local_limit: 429, cluster_limit: 429}", "", 1)
	g = gatewaytest.Start(t, strings.Replace(plain, "127.0.0.1:9001", up.Addr, 1), gatewaytest.Options{})
	for i, want := range []int{200, 911} {
		r, err := http.Get(g.URL("/api/order/1"))
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != want {
			t.Fatalf("default status, request %d: %d, want %d", i+1, r.StatusCode, want)
		}
	}
}
