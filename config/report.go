package config

import (
	"fmt"
	"sort"

	"github.com/tollgate/tollgate/pipeline"
)

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
		// Shared objects in a stable order, so a scrape reads the same way
		// every time.
		var shared []pipeline.Reporter
		for _, v := range s.env.Shared {
			if r, ok := v.(pipeline.Reporter); ok {
				shared = append(shared, r)
			}
		}
		sort.SliceStable(shared, func(i, j int) bool { return typeName(shared[i]) < typeName(shared[j]) })
		for _, r := range shared {
			visit("", r)
		}
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

func typeName(v any) string { return fmt.Sprintf("%T", v) }
