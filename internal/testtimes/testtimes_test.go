package testtimes

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// runSample runs go test -json on the sample package: a slow test, a fast
// one with a subtest, and one that fails.
func runSample(t *testing.T) []byte {
	t.Helper()
	cmd := exec.Command("go", "test", "-json", "-count=1", ".")
	cmd.Dir = "testdata/sample"
	cmd.Env = append(cmd.Environ(), "GOFLAGS=", "GOWORK=off")
	out, _ := cmd.Output() // the sample fails on purpose
	if !bytes.Contains(out, []byte(`"Action":"fail"`)) {
		t.Fatalf("no go test -json stream:\n%s", out)
	}
	return out
}

// TestStreamPrintsWhatGoTestWould: the stream is kept whole; the output
// shows the failed test's output and the package result, not the output
// of tests that passed; the run is reported failed.
func TestStreamPrintsWhatGoTestWould(t *testing.T) {
	stream := runSample(t)
	var kept, out bytes.Buffer
	ok, err := Stream(bytes.NewReader(stream), &kept, &out)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Fatal("a failed run reported ok")
	}
	if !bytes.Equal(kept.Bytes(), stream) {
		t.Fatal("the kept stream differs from go test's")
	}
	text := out.String()
	for _, want := range []string{"the reason it failed", "before the failure", "--- FAIL: TestFails", "FAIL\tsample"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "slow talk that passes") {
		t.Errorf("output holds a passing test's log:\n%s", text)
	}
}

// TestReportListsTheSlowest: the slow test is first, subtests count in
// their parent's time and are not listed apart, the failed one is marked,
// the package is listed.
func TestReportListsTheSlowest(t *testing.T) {
	tests, packages, err := Times(bytes.NewReader(runSample(t)))
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) != 4 || tests[0].Test != "TestSlow" || tests[0].Seconds < 0.3 {
		t.Fatalf("tests %+v", tests)
	}
	// Parallel subtests finish after their parent's function returned:
	// the parent's time is until the last of them ended.
	if tests[1].Test != "TestParallelSubtests" || tests[1].Seconds < 0.2 || tests[1].Seconds > 0.3 {
		t.Fatalf("parallel subtests: %+v", tests[1])
	}
	if len(packages) != 1 || packages[0].Package != "sample" || !packages[0].Failed {
		t.Fatalf("packages %+v", packages)
	}
	var b bytes.Buffer
	if err := Report(&b, tests, packages, 2); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	var listed []string
	for _, l := range lines {
		if strings.HasPrefix(l, "sample Test") {
			listed = append(listed, l)
		}
	}
	if len(listed) != 2 || !strings.HasPrefix(listed[0], "sample TestSlow") {
		t.Fatalf("report:\n%s", b.String())
	}
}

// TestStreamBoundsALongOutput: a test that prints without end keeps only
// the tail of its output.
func TestStreamBoundsALongOutput(t *testing.T) {
	var in bytes.Buffer
	line := `{"Action":"output","Package":"p","Test":"TestLoud","Output":"` + strings.Repeat("x", 1000) + `\n"}` + "\n"
	for range 2000 {
		in.WriteString(line)
	}
	in.WriteString(`{"Action":"output","Package":"p","Test":"TestLoud","Output":"the end\n"}` + "\n")
	in.WriteString(`{"Action":"fail","Package":"p","Test":"TestLoud","Elapsed":1}` + "\n")
	var kept, out bytes.Buffer
	if _, err := Stream(&in, &kept, &out); err != nil {
		t.Fatal(err)
	}
	if out.Len() > maxKeptOutput+1024 || !strings.HasSuffix(out.String(), "the end\n") {
		t.Fatalf("printed %d bytes, ending %q", out.Len(), out.String()[max(0, out.Len()-20):])
	}
}
