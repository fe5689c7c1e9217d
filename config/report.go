package config

import "github.com/tollgate/tollgate/pipeline"

// Reporters calls visit for every part of the snapshot that reports
// figures to /metrics (see pipeline.Reporter): the global filters and
// shared feature objects with route "", then each route's filters with the
// route's name. It is for the metrics writer, at scrape time.
func (s *Snapshot) Reporters(visit func(route string, r pipeline.Reporter)) {
	s.parts(func(route string, v any) {
		if r, ok := v.(pipeline.Reporter); ok {
			visit(route, r)
		}
	})
}

// Inspectors calls visit for every part of the snapshot that shows
// operators its state (see pipeline.Inspector), in the order Reporters
// visits them. It is for the admin API.
func (s *Snapshot) Inspectors(visit func(route string, in pipeline.Inspector)) {
	s.parts(func(route string, v any) {
		if in, ok := v.(pipeline.Inspector); ok {
			visit(route, in)
		}
	})
}

// RoutePart finds the part of a route's chain that shows itself as kind
// ("degrade", "record", "breaker"); nil when the route has none (or there
// is no such route).
func (s *Snapshot) RoutePart(route, kind string) pipeline.Inspector {
	var part pipeline.Inspector
	s.Inspectors(func(r string, in pipeline.Inspector) {
		if part == nil && r == route && route != "" && Shows(in, kind) {
			part = in
		}
	})
	return part
}

// Shows reports whether in shows a state of kind.
func Shows(in pipeline.Inspector, kind string) bool {
	found := false
	in.Inspect(func(k string, _ any) { found = found || k == kind })
	return found
}

// parts visits the global filters and the shared objects with route "",
// then each route's filters with the route's name.
func (s *Snapshot) parts(visit func(route string, v any)) {
	for _, f := range s.Global {
		visit("", f)
	}
	if s.env != nil {
		// Shared objects in their keys' order, so a scrape reads the same
		// way every time.
		s.env.EachShared(func(_ string, v any) { visit("", v) })
	}
	for _, rt := range s.Routes {
		if rt.Chain == nil {
			continue
		}
		for _, f := range rt.Chain.Filters() {
			visit(rt.Name, f)
		}
	}
}
