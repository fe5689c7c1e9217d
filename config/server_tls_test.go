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
	if f.TLS.MinVersion != "1.2" || !slices.Equal(f.TLS.ALPN, []string{"http/1.1"}) {
		t.Fatalf("defaults: %+v", f.TLS)
	}

	for name, tc := range map[string]struct{ yaml, want, line string }{
		"old version":  {block("  min_version: \"1.1\"\n"), "TLS 1.0 and 1.1 are refused", "t.yaml:3"},
		"h2 not yet":   {block("  alpn: [h2, http/1.1]\n"), "h2 is not supported", "t.yaml:3"},
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
	if got := RestartOnlyChanges(f, f); len(got) != 0 {
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
