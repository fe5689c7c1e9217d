package admin

import (
	"net/http"

	"github.com/tollgate/tollgate/pipeline"
)

// Recording endpoints: what the routes' record and mirror rules are doing,
// and the operator's switch for recording, route by route.

func (s *Server) registerRecording(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/recording", s.recording)
	mux.HandleFunc("POST /admin/recording", s.auth(s.setRecording))
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
		part := s.deps.Snapshot().RoutePart(route, "record")
		sw, _ := part.(pipeline.Switcher)
		return sw
	})
}
