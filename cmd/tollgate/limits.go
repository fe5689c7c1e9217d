package main

import (
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/limiter"
)

// limitReports lists the rate-limit rules of snap: the top-level ones,
// then each route's.
func limitReports(snap *config.Snapshot) []limiter.RuleReport {
	out := []limiter.RuleReport{}
	for _, f := range snap.Global {
		if lf, ok := f.(*limiter.Filter); ok {
			out = append(out, lf.Rules()...)
		}
	}
	for _, r := range snap.Routes {
		for _, f := range r.Chain.Filters() {
			if lf, ok := f.(*limiter.Filter); ok {
				out = append(out, lf.Rules()...)
			}
		}
	}
	return out
}
