package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunPrintsWhatGoTestWould: a passing run prints the package's ok
// line and no test output; a failing one prints the failed test's output
// and the FAIL lines and keeps go test's exit code; both record every
// test's time, which -show lists.
func TestRunPrintsWhatGoTestWould(t *testing.T) {
	dir, err := filepath.Abs("testdata/sample")
	if err != nil {
		t.Fatal(err)
	}
	for _, fail := range []bool{false, true} {
		rec := filepath.Join(t.TempDir(), "times.jsonl")
		cmd := exec.Command("go", "test", "-json", "-count=1", ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "SAMPLE_FAIL=")
		if fail {
			cmd.Env = append(cmd.Env, "SAMPLE_FAIL=1")
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var printed bytes.Buffer
		timings := printEvents(out, &printed)
		exitErr := cmd.Wait()
		if err := writeTimings(rec, timings); err != nil {
			t.Fatal(err)
		}
		got := printed.String()
		if !fail {
			if exitErr != nil || !strings.HasPrefix(got, "ok  \tsample") || strings.Contains(got, "quiet when it passes") {
				t.Fatalf("passing run: %v\n%s", exitErr, got)
			}
		} else {
			for _, want := range []string{"context before the failure", "the failure itself", "--- FAIL: TestFailsOnRequest", "FAIL\tsample"} {
				if !strings.Contains(got, want) {
					t.Fatalf("failing run lacks %q:\n%s", want, got)
				}
			}
			if exitErr == nil || strings.Contains(got, "quiet when it passes") {
				t.Fatalf("failing run: exit %v\n%s", exitErr, got)
			}
		}
		var shown bytes.Buffer
		if err := showSlowest([]string{rec}, 5, &shown); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(shown.String(), "TestFailsOnRequest") || !strings.Contains(shown.String(), "sample") {
			t.Fatalf("-show:\n%s", shown.String())
		}
	}
}
