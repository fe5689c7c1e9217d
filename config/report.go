package config

import "github.com/tollgate/tollgate/pipeline"

// Reporters calls visit for every part of the snapshot that reports
// figures to /metrics (see pipeline.Reporter): the global filters and
// shared feature objects with route "", then each route's filters with the
// route's name. It is for the metrics writer, at scrape time.
func (s *Snapshot) Reporters(visit func(route string, r pipeline.Reporter)) {
	for _, f := range s.Global {
		if r, ok := f.(pipeline.Reporter); ok {
			visit("", r)
		}
	}
	if s.env != nil {
		// Shared objects in their keys' order, so a scrape reads the same
		// way every time.
		s.env.EachShared(func(_ string, v any) {
			if r, ok := v.(pipeline.Reporter); ok {
				visit("", r)
			}
		})
	}
	for _, rt := range s.Routes {
		if rt.Chain == nil {
			continue
		}
		for _, f := range rt.Chain.Filters() {
			if r, ok := f.(pipeline.Reporter); ok {
				visit(rt.Name, r)
			}
		}
	}
}
