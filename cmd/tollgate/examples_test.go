package main

import (
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
	for _, f := range files {
		out, err := exec.Command(binary, "validate", f).CombinedOutput()
		if err != nil || !strings.Contains(string(out), ": ok (") {
			t.Errorf("%s: %v\n%s", f, err, out)
		}
	}
}
