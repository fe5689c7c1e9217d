package history

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"time"
)

// Suggestion is a limit for one route, from its history.
type Suggestion struct {
	Route string
	// Peak is the route's busiest minute in the history, and PeakAt when.
	Peak   uint64
	PeakAt time.Time
	// TypicalPeak is the median over the hours the route had traffic of
	// each hour's busiest minute: how busy a usual busy minute is.
	TypicalPeak uint64
	Hours       int    // hours the route had traffic
	Requests    uint64 // in all
	// Rate and Burst are the suggested limit, per second.
	Rate, Burst int
}

// Options shape the suggestions.
type Options struct {
	// Headroom multiplies the busiest minute's rate (default 2: a
	// minute's average hides faster bursts inside it, and traffic grows).
	Headroom float64
	// BurstFactor is the bucket's size in seconds of Rate (default 2).
	BurstFactor float64
}

// Suggest proposes a limit per route: the busiest minute's rate per
// second times the headroom, rounded up, and never below the busiest
// minute's own rate.
func Suggest(hours []Hour, o Options) []Suggestion {
	if o.Headroom < 1 {
		o.Headroom = 2
	}
	if o.BurstFactor < 1 {
		o.BurstFactor = 2
	}
	byRoute := map[string]*Suggestion{}
	peaks := map[string][]uint64{}
	for _, h := range hours {
		for route, r := range h.Routes {
			s := byRoute[route]
			if s == nil {
				s = &Suggestion{Route: route}
				byRoute[route] = s
			}
			s.Requests += r.Requests
			s.Hours++
			if r.PeakMinute > s.Peak {
				s.Peak, s.PeakAt = r.PeakMinute, r.PeakAt
			}
			peaks[route] = append(peaks[route], r.PeakMinute)
		}
	}
	out := make([]Suggestion, 0, len(byRoute))
	for route, s := range byRoute {
		p := peaks[route]
		sort.Slice(p, func(i, j int) bool { return p[i] < p[j] })
		s.TypicalPeak = p[len(p)/2]
		perSecond := float64(s.Peak) / 60
		s.Rate = max(int(math.Ceil(perSecond*o.Headroom)), int(math.Ceil(perSecond)), 1)
		s.Burst = max(int(math.Ceil(float64(s.Rate)*o.BurstFactor)), s.Rate)
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Route < out[j].Route })
	return out
}

// WriteYAML prints the suggestions as route fragments to paste into a
// configuration, each explained. scope is the rule's scope: cluster for a
// cluster's history, local for one node's.
func WriteYAML(w io.Writer, s []Suggestion, o Options, scope, source string, from, to time.Time) error {
	if o.Headroom < 1 {
		o.Headroom = 2
	}
	if o.BurstFactor < 1 {
		o.BurstFactor = 2
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("# Limits suggested from %s, %s to %s (UTC), %d route(s).\n", source, from.UTC().Format("2006-01-02 15:04"), to.UTC().Format("2006-01-02 15:04"), len(s))
	p("# rate: the busiest minute's requests per second × %s headroom, rounded up;\n", trimFloat(o.Headroom))
	p("# burst: %s s of rate. Paste each route's limits into that route.\n", trimFloat(o.BurstFactor))
	if len(s) == 0 {
		p("# No route had traffic in this period: nothing to suggest.\n")
		return nil
	}
	p("routes:\n")
	for _, r := range s {
		p("  - name: %s\n", strconv.Quote(r.Route))
		p("    # busiest minute %s: %d requests (%s/s); a usual hour's busiest minute: %d (%s/s);\n",
			r.PeakAt.UTC().Format("2006-01-02 15:04"), r.Peak, perSecond(r.Peak), r.TypicalPeak, perSecond(r.TypicalPeak))
		p("    # %d requests over %d hour(s) with traffic\n", r.Requests, r.Hours)
		p("    limits:\n")
		p("      - {by: route, rate: %d, per: 1s, burst: %d, scope: %s}\n", r.Rate, r.Burst, scope)
	}
	return nil
}

func perSecond(perMinute uint64) string { return trimFloat(float64(perMinute) / 60) }

func trimFloat(f float64) string { return strconv.FormatFloat(math.Round(f*10)/10, 'f', -1, 64) }
