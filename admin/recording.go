package admin

import (
	"net/http"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/pipeline"
)

// Recording endpoints: what the routes' record and mirror rules are doing,
// and the operator's switch for recording, route by route.

func (s *Server) registerRecording(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/recording", s.recording)
	mux.HandleFunc("POST /admin/recording", s.auth(s.setRecording))
}

// routePart finds the part of a route's chain that shows itself as kind;
// nil when the route has none (or there is no such route).
func routePart(snap *config.Snapshot, route, kind string) pipeline.Inspector {
	var part pipeline.Inspector
	snap.Inspectors(func(r string, in pipeline.Inspector) {
		if part == nil && r == route && route != "" && shows(in, kind) {
			part = in
		}
	})
	return part
}

// shows reports whether in shows a state of kind.
func shows(in pipeline.Inspector, kind string) bool {
	found := false
	in.Inspect(func(k string, _ any) { found = found || k == kind })
	return found
}

func (s *Server) recording(w http.ResponseWriter, _ *http.Request) {
	routes := map[string]any{}
	mirrors := map[string]any{}
	var writer any
	s.deps.Snapshot().Inspectors(func(route string, in pipeline.Inspector) {
		in.Inspect(func(kind string, state any) {
			switch {
			case kind == "record" && route != "":
				routes[route] = state
			case kind == "mirror" && route != "":
				mirrors[route] = state
			case kind == "recording" && route == "":
				writer = state
			}
		})
	})
	out := map[string]any{"routes": routes, "mirrors": mirrors, "operator_changes": s.prot.changes.Load()}
	if writer != nil && len(routes) > 0 { // the writer is the record rules'
		out["writer"] = writer
	}
	writeJSON(w, http.StatusOK, out)
}

// setRecording takes {"route": NAME, "on": true|false, "reason": "..."}.
func (s *Server) setRecording(w http.ResponseWriter, r *http.Request) {
	s.setRouteSwitch(w, r, "recording", "a record rule", func(route string) pipeline.Switcher {
		part := routePart(s.deps.Snapshot(), route, "record")
		sw, _ := part.(pipeline.Switcher)
		return sw
	})
}
