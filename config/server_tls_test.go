package config

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/testutil"
)

// TestServerTLSBlock: a tls block loads with its defaults; a bad one is an
// error at its line; changing it is a restart-only change.
func TestServerTLSBlock(t *testing.T) {
	dir := t.TempDir()
	ca := testutil.NewTestCA(t)
	cert, key := ca.Issue(t, dir, "api", "A", "api.test")
	block := func(extra string) string {
		return "listen: 127.0.0.1:8080\ntls:\n  listen: 127.0.0.1:8443\n  certs:\n    - {cert: " + cert + ", key: " + key + "}\n" + extra
	}
	f, err := Parse("t.yaml", []byte(block("")), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	f.Defaults()
	if err := f.Validate("t.yaml"); err != nil {
		t.Fatal(err)
	}
	if f.TLS.MinVersion != "1.2" || !slices.Equal(f.TLS.ALPN, []string{"h2", "http/1.1"}) || !f.TLS.OffersH2() {
		t.Fatalf("defaults: %+v", f.TLS)
	}

	for name, tc := range map[string]struct{ yaml, want, line string }{
		"old version":  {block("  min_version: \"1.1\"\n"), "TLS 1.0 and 1.1 are refused", "t.yaml:3"},
		"unknown alpn": {block("  alpn: [h2, spdy/3]\n"), "unknown protocol \"spdy/3\"", "t.yaml:3"},
		"alpn twice":   {block("  alpn: [h2, h2]\n"), "listed twice", "t.yaml:3"},
		"tiny window":  {block("  http2: {stream_window_bytes: 100}\n"), "at least 16384", "t.yaml:3"},
		"many streams": {block("  http2: {max_concurrent_streams: 100000}\n"), "at most 10000", "t.yaml:3"},
		"missing file": {strings.Replace(block(""), cert, filepath.Join(dir, "none.pem"), 1), "none.pem", "t.yaml:3"},
		"key mismatch": {strings.Replace(block(""), key, writeFile(t, dir, "other.key", "junk"), 1), "other.key", "t.yaml:3"},
		"no certs":     {"tls:\n  listen: 127.0.0.1:8443\n", "at least one", "t.yaml:2"},
	} {
		t.Run(name, func(t *testing.T) {
			f, err := Parse("t.yaml", []byte(tc.yaml), noEnv)
			if err == nil {
				f.Defaults()
				err = f.Validate("t.yaml")
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.line+":") {
				t.Fatalf("error %v, want %q at %s (the tls block)", err, tc.want, tc.line)
			}
		})
	}

	next, err := Parse("t.yaml", []byte(block("  min_version: \"1.3\"\n")), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	next.Defaults()
	if got := RestartOnlyChanges(f, next); !slices.Contains(got, "tls") {
		t.Fatalf("restart-only changes %v, want tls", got)
	}
	h2, err := Parse("t.yaml", []byte(block("  http2: {max_concurrent_streams: 10}\n")), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	h2.Defaults()
	if got := RestartOnlyChanges(f, h2); !slices.Contains(got, "tls") {
		t.Fatalf("restart-only changes %v for an http2 limit, want tls", got)
	}
	same, err := Parse("t.yaml", []byte(block("")), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	same.Defaults()
	if got := RestartOnlyChanges(f, same); len(got) != 0 {
		t.Fatalf("no change reported as %v", got)
	}
}

// TestRedirectHTTPSNeedsTLS: a route cannot send clients to a TLS
// listener the configuration does not have.
func TestRedirectHTTPSNeedsTLS(t *testing.T) {
	_, err := compile(t, `
services:
  up: {instances: [{addr: "127.0.0.1:1"}]}
routes:
  - name: r
    match: {prefix: /}
    redirect_https: true
    service: up
`, noEnv)
	if err == nil || !strings.Contains(err.Error(), "redirect_https needs a tls block") {
		t.Fatalf("error %v", err)
	}
}
