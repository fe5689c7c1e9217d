package edgetls

import (
	"crypto/tls"
	"os"
	"testing"

	"github.com/tollgate/tollgate/internal/testutil"
)

func org(t *testing.T, s *Store, sni string) string {
	t.Helper()
	c, err := s.Certificate(&tls.ClientHelloInfo{ServerName: sni})
	if err != nil {
		t.Fatal(err)
	}
	return c.Leaf.Subject.Organization[0]
}

// TestReloadKeepsTheLastGoodSet: a file caught half-written (or broken)
// fails the reload and the certificates in use stay; the next good write
// is taken.
func TestReloadKeepsTheLastGoodSet(t *testing.T) {
	dir := t.TempDir()
	ca := testutil.NewTestCA(t)
	cert, key := ca.Issue(t, dir, "a", "A", "a.test", "*.a.test")
	s, err := NewStore([]Pair{{Cert: cert, Key: key}})
	if err != nil {
		t.Fatal(err)
	}
	if org(t, s, "a.test") != "A" || org(t, s, "x.a.test") != "A" || org(t, s, "other.test") != "A" {
		t.Fatal("selection")
	}
	if err := os.WriteFile(cert, []byte("-----BEGIN CERTIFICATE-----\nAAAA"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !s.changed() {
		t.Fatal("a rewritten file not seen as changed")
	}
	if _, err := s.Reload(); err == nil {
		t.Fatal("a broken certificate file loaded")
	}
	if org(t, s, "a.test") != "A" {
		t.Fatal("a failed reload replaced the certificates in use")
	}
	ca.Issue(t, dir, "a", "A2", "a.test")
	if changed, err := s.Reload(); err != nil || !changed {
		t.Fatalf("reload after the fix: %v %v", changed, err)
	}
	if org(t, s, "a.test") != "A2" {
		t.Fatal("the fixed file was not taken")
	}
}
