package config

import (
	"strings"
	"testing"
)

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
