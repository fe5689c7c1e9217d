package replay

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Summary is what a replay found.
type Summary struct {
	// Sent requests got an answer that Matched the recorded one or was
	// Differing (ByKind counts each kind a request differed in); Errors
	// got no answer; Skipped were not sent (a request body not recorded
	// whole, an unreadable line; SkippedWhy says which).
	Sent, Matched, Differing, Errors, Skipped int
	ByKind                                    map[string]int
	SkippedWhy                                map[string]int
	// Credentials counts requests re-signed, given a fresh token, or sent
	// without the credentials that were masked.
	Resigned, Reissued, Withheld int

	recorded, now []time.Duration
	places        map[place]int
}

// place is where requests differed, for the summary's list.
type place struct {
	route, kind, where, change string
}

func newSummary() *Summary {
	return &Summary{ByKind: map[string]int{}, SkippedWhy: map[string]int{}, places: map[place]int{}}
}

func (s *Summary) add(r *Result) {
	if r.skipped != "" {
		s.Skipped++
		s.SkippedWhy[r.skipped]++
		return
	}
	s.Sent++
	switch r.Credentials {
	case "resigned":
		s.Resigned++
	case "reissued":
		s.Reissued++
	case "withheld":
		s.Withheld++
	}
	if r.Error != "" && r.Status == 0 {
		s.Errors++
		s.places[place{route: r.Route, kind: "error", change: errorClass(r.Error)}]++
		return
	}
	s.recorded = append(s.recorded, r.recorded)
	s.now = append(s.now, r.took)
	if len(r.Kinds) == 0 {
		s.Matched++
		return
	}
	s.Differing++
	for _, k := range r.Kinds {
		s.ByKind[k]++
	}
	seen := map[place]bool{}
	for _, d := range r.Differences {
		p := place{route: r.Route, kind: d.Kind, where: d.Where}
		if d.Kind == "status" {
			p.change = d.Want + " → " + d.Got
		}
		if !seen[p] {
			seen[p] = true
			s.places[p]++
		}
	}
}

// errorClass shortens a transport error for grouping: the text after the
// last colon names the cause ("connection refused", "timeout").
func errorClass(msg string) string {
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		msg = msg[i+2:]
	}
	if len(msg) > 80 {
		msg = msg[:80]
	}
	return msg
}

// Exceeds reports whether more requests differed or failed than allowed.
func (s *Summary) Exceeds(maxDiff int) bool { return s.Differing+s.Errors > maxDiff }

// Places lists where requests differed, most frequent first: "count kind
// where route" lines, at most n.
func (s *Summary) Places(n int) []string {
	type row struct {
		p place
		n int
	}
	rows := make([]row, 0, len(s.places))
	for p, c := range s.places {
		rows = append(rows, row{p, c})
	}
	slices.SortFunc(rows, func(a, b row) int {
		if c := cmp.Compare(b.n, a.n); c != 0 {
			return c
		}
		return cmp.Or(strings.Compare(a.p.route, b.p.route), strings.Compare(a.p.kind, b.p.kind),
			strings.Compare(a.p.where, b.p.where), strings.Compare(a.p.change, b.p.change))
	})
	var out []string
	for _, r := range rows[:min(n, len(rows))] {
		where := strings.TrimSpace(r.p.where + " " + r.p.change)
		out = append(out, fmt.Sprintf("%7d  %-6s  %-30s  route %s", r.n, r.p.kind, where, r.p.route))
	}
	return out
}

// Print writes the summary for people.
func (s *Summary) Print(w io.Writer, target string, took time.Duration) {
	fmt.Fprintf(w, "replayed %d requests against %s in %s\n", s.Sent, target, took.Round(time.Millisecond))
	fmt.Fprintf(w, "  matched     %7d\n", s.Matched)
	fmt.Fprintf(w, "  differing   %7d   status %d, header %d, body %d\n", s.Differing, s.ByKind["status"], s.ByKind["header"], s.ByKind["body"])
	fmt.Fprintf(w, "  errors      %7d\n", s.Errors)
	if s.Skipped > 0 {
		var why []string
		for k, n := range s.SkippedWhy {
			why = append(why, fmt.Sprintf("%s %d", k, n))
		}
		slices.Sort(why)
		fmt.Fprintf(w, "  skipped     %7d   %s\n", s.Skipped, strings.Join(why, ", "))
	}
	if len(s.now) > 0 {
		fmt.Fprintf(w, "  latency     recorded p50 %s p99 %s   now p50 %s p99 %s\n",
			msText(percentile(s.recorded, 50)), msText(percentile(s.recorded, 99)),
			msText(percentile(s.now, 50)), msText(percentile(s.now, 99)))
	}
	if s.Resigned+s.Reissued+s.Withheld > 0 {
		fmt.Fprintf(w, "  credentials %7d re-signed, %d with a fresh token, %d without the masked ones they carried\n",
			s.Resigned, s.Reissued, s.Withheld)
	}
	if places := s.Places(20); len(places) > 0 {
		fmt.Fprintln(w, "differences, most frequent first:")
		for _, p := range places {
			fmt.Fprintln(w, p)
		}
	}
}

// Percentile returns the p-th percentile of the latencies now (recorded
// when recorded is true).
func (s *Summary) Percentile(p float64, recorded bool) time.Duration {
	if recorded {
		return percentile(s.recorded, p)
	}
	return percentile(s.now, p)
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func msText(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }

// writeDiff writes one result as a JSON line.
func writeDiff(w io.Writer, r *Result) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
