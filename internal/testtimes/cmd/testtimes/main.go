// Command testtimes keeps the event stream of `go test -json` while
// printing what go test prints without it (-save FILE), and lists the
// slowest tests and packages of a kept stream (-report FILE).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"

	"github.com/tollgate/tollgate/internal/testtimes"
)

func main() {
	save := flag.String("save", "", "read go test -json on stdin, keep it in `FILE`, print go test's usual output")
	report := flag.String("report", "", "list the slowest tests and packages of the kept `FILE`")
	n := flag.Int("n", 25, "how many of each to list")
	flag.Parse()
	switch {
	case *save != "":
		f, err := os.Create(*save)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testtimes:", err)
			os.Exit(2)
		}
		w := bufio.NewWriter(f)
		ok, err := testtimes.Stream(os.Stdin, w, os.Stdout)
		if ferr := w.Flush(); err == nil {
			err = ferr
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "testtimes:", err)
			os.Exit(2)
		}
		if !ok {
			os.Exit(1)
		}
	case *report != "":
		f, err := os.Open(*report)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testtimes:", err, "(make test keeps it; run it first)")
			os.Exit(2)
		}
		defer f.Close()
		tests, packages, err := testtimes.Times(f)
		if err == nil {
			err = testtimes.Report(os.Stdout, tests, packages, *n)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "testtimes:", err)
			os.Exit(2)
		}
	default:
		flag.Usage()
		os.Exit(2)
	}
}
