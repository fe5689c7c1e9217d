package main

import (
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/pipeline"
)

// limitReports lists the rate-limit rules of snap (limiter.RuleReport):
// the top-level ones, then each route's.
func limitReports(snap *config.Snapshot) []any {
	out := []any{}
	snap.Inspectors(func(_ string, in pipeline.Inspector) {
		in.Inspect(func(kind string, state any) {
			if kind == "limits" {
				out = append(out, state)
			}
		})
	})
	return out
}

// routeStates returns what the routes' parts show as kind, by route.
func routeStates(snap *config.Snapshot, kind string) map[string]any {
	out := map[string]any{}
	snap.Inspectors(func(route string, in pipeline.Inspector) {
		in.Inspect(func(k string, state any) {
			if k == kind && route != "" {
				out[route] = state
			}
		})
	})
	return out
}
