// Package testtimes reads the event stream of `go test -json`: it passes a
// run on as go test would have printed it without -json (package results,
// and the output of failed tests only) while keeping the stream, and
// reports the slowest tests and packages of a kept stream.
package testtimes

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Event is one line of `go test -json` (cmd/test2json).
type Event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64 // seconds, on pass, fail and skip
	Output  string
}

// maxLine bounds one event line; the output of a test is cut into lines by
// test2json, so a longer one is not an event of it.
const maxLine = 4 << 20

// maxKeptOutput bounds the output kept for each running test, its last
// bytes kept: enough for a failure's message and stack.
const maxKeptOutput = 256 << 10

// Stream copies every event line of in to save and writes to out what go
// test prints without -json. It reports whether every test and package
// passed.
func Stream(in io.Reader, save, out io.Writer) (ok bool, err error) {
	ok = true
	pending := map[string]*strings.Builder{} // output of running tests, by package and test
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		line := sc.Bytes()
		if _, err := save.Write(append(line, '\n')); err != nil {
			return false, err
		}
		var e Event
		if json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(out, "%s\n", line) // not an event: go test's own message
			continue
		}
		key := e.Package + " " + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(out, e.Output)
		case e.Action == "build-fail":
			ok = false
		case e.Test == "" && e.Action == "output":
			if e.Output != "PASS\n" {
				fmt.Fprint(out, e.Output)
			}
		case e.Test == "" && e.Action == "fail":
			ok = false
		case e.Action == "output":
			b := pending[key]
			if b == nil {
				b = &strings.Builder{}
				pending[key] = b
			}
			b.WriteString(e.Output)
			if b.Len() > maxKeptOutput {
				tail := b.String()[b.Len()-maxKeptOutput/2:]
				b.Reset()
				b.WriteString("[earlier output cut]\n" + tail)
			}
		case e.Action == "fail":
			ok = false
			if b := pending[key]; b != nil {
				fmt.Fprint(out, b.String())
			}
			delete(pending, key)
		case e.Action == "pass" || e.Action == "skip":
			delete(pending, key)
		}
	}
	return ok, sc.Err()
}

// Timing is how long a test or a package took.
type Timing struct {
	Package, Test string
	Seconds       float64
	Failed        bool
}

// Times reads a kept stream: the top-level tests' and the packages' times,
// slowest first. A test's time runs from its start (or its resumption,
// when it waited as a parallel test) to the end of its last subtest:
// parallel subtests end after their parent's own function returned.
func Times(in io.Reader) (tests, packages []Timing, err error) {
	type span struct {
		start, end time.Time
		timing     Timing
	}
	spans := map[string]*span{}
	var order []string
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		var e Event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		if e.Test == "" {
			if e.Action == "pass" || e.Action == "fail" {
				packages = append(packages, Timing{Package: e.Package, Seconds: e.Elapsed, Failed: e.Action == "fail"})
			}
			continue
		}
		top, _, sub := strings.Cut(e.Test, "/")
		key := e.Package + " " + top
		sp := spans[key]
		if sp == nil {
			sp = &span{timing: Timing{Package: e.Package, Test: top}}
			spans[key] = sp
			order = append(order, key)
		}
		switch e.Action {
		case "run", "cont":
			if !sub {
				sp.start = e.Time
			}
		case "pass", "fail", "skip":
			if e.Time.After(sp.end) {
				sp.end = e.Time
			}
			if !sub {
				sp.timing.Seconds = e.Elapsed
				sp.timing.Failed = e.Action == "fail"
			}
		}
	}
	for _, key := range order {
		sp := spans[key]
		if !sp.start.IsZero() && sp.end.After(sp.start) {
			sp.timing.Seconds = max(sp.timing.Seconds, sp.end.Sub(sp.start).Seconds())
		}
		tests = append(tests, sp.timing)
	}
	slowestFirst := func(ts []Timing) {
		sort.SliceStable(ts, func(i, j int) bool { return ts[i].Seconds > ts[j].Seconds })
	}
	slowestFirst(tests)
	slowestFirst(packages)
	return tests, packages, sc.Err()
}

// Report writes the n slowest packages and tests.
func Report(w io.Writer, tests, packages []Timing, n int) error {
	var total float64
	for _, p := range packages {
		total += p.Seconds
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%d packages, %.1fs of package time in all (packages run in parallel)\n\n", len(packages), total)
	fmt.Fprintf(tw, "SLOWEST PACKAGES\tSECONDS\n")
	for _, p := range packages[:min(n, len(packages))] {
		fmt.Fprintf(tw, "%s\t%.1f%s\n", p.Package, p.Seconds, failMark(p))
	}
	fmt.Fprintf(tw, "\nSLOWEST TESTS\tSECONDS\n")
	for _, t := range tests[:min(n, len(tests))] {
		fmt.Fprintf(tw, "%s %s\t%.1f%s\n", t.Package, t.Test, t.Seconds, failMark(t))
	}
	return tw.Flush()
}

func failMark(t Timing) string {
	if t.Failed {
		return "  FAILED"
	}
	return ""
}
