package auth

import (
	"strings"
	"testing"
)

// TestNoAppKeyInTheJWTNamespace: "jwt:" names JWT callers; no consumer's
// app key may take it.
func TestNoAppKeyInTheJWTNamespace(t *testing.T) {
	if _, err := NewConsumers([]*Consumer{{AppKey: "jwt:demo-app", Secret: []byte("0123456789abcdef"), Enabled: true}}); err == nil ||
		!strings.Contains(err.Error(), "reserved") {
		t.Fatalf("app key in the jwt: namespace: %v", err)
	}
}
