// Command testtimes runs a `go test -json` command, prints what a plain
// `go test` would (a line a package, and the output of what failed), and
// keeps every test's and package's time in a file, so that `make
// test-times` can list the slowest without running anything again.
//
//	testtimes -record FILE -- go test -json ...   run, print, record
//	testtimes -show FILE... [-n 25]               the slowest, from records
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// timing is one line of a record file.
type timing struct {
	Package string  `json:"package"`
	Test    string  `json:"test,omitempty"` // "" for the package as a whole
	Seconds float64 `json:"seconds"`
	Result  string  `json:"result"`
}

func main() {
	record := flag.String("record", "", "file the timings are written to (with -- and a go test -json command)")
	n := flag.Int("n", 25, "with -show: how many tests and packages to list")
	show := flag.Bool("show", false, "list the slowest tests and packages of the record files given as arguments")
	flag.Parse()
	switch {
	case *show:
		if err := showSlowest(flag.Args(), *n, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "testtimes:", err)
			os.Exit(1)
		}
	case *record != "" && flag.NArg() > 0:
		os.Exit(run(flag.Args(), *record))
	default:
		fmt.Fprintln(os.Stderr, "usage: testtimes -record FILE -- go test -json ... | testtimes -show FILE... [-n 25]")
		os.Exit(2)
	}
}

// run runs the command, prints its events as go test would and writes
// the timings; it returns the command's exit code.
func run(argv []string, recordPath string) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testtimes:", err)
		return 2
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testtimes:", err)
		return 2
	}
	timings := printEvents(out, os.Stdout)
	code := 0
	if err := cmd.Wait(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			fmt.Fprintln(os.Stderr, "testtimes:", err)
			return 2
		}
		code = exit.ExitCode()
	}
	if err := writeTimings(recordPath, timings); err != nil {
		fmt.Fprintln(os.Stderr, "testtimes:", err)
	}
	return code
}

// printEvents prints a package's line when it ends, and the output of each
// test that failed (or of the package, when it failed outside a test);
// lines that are not JSON (a build error) go through as they are.
func printEvents(r io.Reader, w io.Writer) []timing {
	var timings []timing
	held := map[string][]string{} // package + "\x00" + test → output
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintln(w, string(line))
			continue
		}
		key := e.Package + "\x00" + e.Test
		switch e.Action {
		case "output":
			held[key] = append(held[key], e.Output)
		case "pass", "fail", "skip":
			if e.Action == "fail" {
				for _, o := range held[key] {
					fmt.Fprint(w, o)
				}
			}
			if e.Test == "" {
				// The package's own lines ("ok  pkg 1.2s", "FAIL", "?  pkg [no test files]").
				if e.Action != "fail" {
					for _, o := range held[key] {
						if strings.HasPrefix(o, "ok ") || strings.HasPrefix(o, "?") || strings.HasPrefix(o, "---") {
							fmt.Fprint(w, o)
						}
					}
				}
				for k := range held {
					if strings.HasPrefix(k, e.Package+"\x00") {
						delete(held, k)
					}
				}
			} else {
				delete(held, key)
			}
			timings = append(timings, timing{Package: e.Package, Test: e.Test, Seconds: e.Elapsed, Result: e.Action})
		}
	}
	return timings
}

func writeTimings(path string, timings []timing) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, t := range timings {
		if err := enc.Encode(t); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// showSlowest lists the n slowest top-level tests and packages of the
// record files.
func showSlowest(paths []string, n int, w io.Writer) error {
	var tests, pkgs []timing
	var when time.Time
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("%w (run make test first)", err)
		}
		if st.ModTime().After(when) {
			when = st.ModTime()
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		dec := json.NewDecoder(f)
		for {
			var t timing
			if err := dec.Decode(&t); err == io.EOF {
				break
			} else if err != nil {
				f.Close()
				return fmt.Errorf("%s: %w", p, err)
			}
			switch {
			case t.Test == "":
				pkgs = append(pkgs, t)
			case !strings.Contains(t.Test, "/"):
				tests = append(tests, t)
			}
		}
		f.Close()
	}
	fmt.Fprintf(w, "from the run of %s\n", when.Format(time.DateTime))
	list := func(title string, ts []timing, name func(timing) string) {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Seconds > ts[j].Seconds })
		var total float64
		for _, t := range ts {
			total += t.Seconds
		}
		fmt.Fprintf(w, "\n%s (%d, %.0f s in all):\n", title, len(ts), total)
		for _, t := range ts[:min(n, len(ts))] {
			fmt.Fprintf(w, "%8.1fs  %s%s\n", t.Seconds, name(t), map[bool]string{true: "  (" + t.Result + ")", false: ""}[t.Result != "pass"])
		}
	}
	list("slowest packages", pkgs, func(t timing) string { return t.Package })
	list("slowest tests", tests, func(t timing) string {
		return t.Test + "  " + strings.TrimPrefix(t.Package, "github.com/tollgate/tollgate/")
	})
	return nil
}
