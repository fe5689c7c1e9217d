package admin

import (
	"net/http"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/mirror"
	"github.com/tollgate/tollgate/record"
)

// Recording endpoints: what the routes' record and mirror rules are doing,
// and the operator's switch for recording, route by route.

func (s *Server) registerRecording(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/recording", s.recording)
	mux.HandleFunc("POST /admin/recording", s.auth(s.setRecording))
}

// recorder finds a route's record rule.
func recorder(snap *config.Snapshot, route string) *record.Recorder {
	for _, r := range snap.Routes {
		if r.Name != route {
			continue
		}
		for _, f := range r.Chain.Filters() {
			if rec, ok := f.(*record.Recorder); ok {
				return rec
			}
		}
	}
	return nil
}

func (s *Server) recording(w http.ResponseWriter, _ *http.Request) {
	snap := s.deps.Snapshot()
	routes := map[string]any{}
	mirrors := map[string]any{}
	var writer *record.Writer
	for _, r := range snap.Routes {
		for _, f := range r.Chain.Filters() {
			switch v := f.(type) {
			case *record.Recorder:
				queued, dropped := v.Counts()
				routes[r.Name] = map[string]any{"on": v.On(), "sample": v.Sample(), "queued": queued, "dropped": dropped}
				writer = v.Writer()
			case *mirror.Filter:
				mirrors[r.Name] = v.Counts()
			}
		}
	}
	out := map[string]any{"routes": routes, "mirrors": mirrors, "operator_changes": s.prot.changes.Load()}
	if writer != nil {
		out["writer"] = writer.Stats()
	}
	writeJSON(w, http.StatusOK, out)
}

// setRecording takes {"route": NAME, "on": true|false, "reason": "..."}.
func (s *Server) setRecording(w http.ResponseWriter, r *http.Request) {
	s.setRouteSwitch(w, r, "recording", "a record rule", func(route string) routeSwitch {
		if rec := recorder(s.deps.Snapshot(), route); rec != nil {
			return rec
		}
		return nil
	})
}
