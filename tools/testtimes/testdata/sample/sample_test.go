package sample

import (
	"os"
	"testing"
)

func TestPasses(t *testing.T) { t.Log("quiet when it passes") }

// TestFailsOnRequest fails when SAMPLE_FAIL is set, with output that must
// be shown.
func TestFailsOnRequest(t *testing.T) {
	t.Log("context before the failure")
	if os.Getenv("SAMPLE_FAIL") != "" {
		t.Fatal("the failure itself")
	}
}
