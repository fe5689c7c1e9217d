//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExamplesValidate keeps every shipped example a configuration the
// gateway accepts.
func TestExamplesValidate(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	// The quick start's files name a certificate its reader makes with
	// tollgate cert, relative to where the gateway runs.
	dir := t.TempDir()
	if out, err := exec.Command(binary, "cert", "--out", filepath.Join(dir, "quickstart", "tls")).CombinedOutput(); err != nil {
		t.Fatalf("tollgate cert: %v\n%s", err, out)
	}
	for _, f := range files {
		abs, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel() // each starts a binary built with -race: a second each
			validateExample(t, abs, dir)
		})
	}
}

func validateExample(t *testing.T, f, dir string) {
	cmd := exec.Command(binary, "validate", f)
	cmd.Dir = dir
	// The secrets examples take from the environment.
	cmd.Env = append(os.Environ(), "DEMO_APP_SECRET=example-secret-0123456789",
		"BIG_PARTNER_SECRET=example-secret-0123456789", "JWT_SECRET=example-jwt-secret-0123456789abcdef",
		"ETCD_PASSWORD=example-etcd-password")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), ": ok (") {
		t.Errorf("%s: %v\n%s", f, err, out)
	}
}
