package admin

import "net/http"

// limits lists every rate-limit rule of the running configuration: its
// mode (cluster, local fallback, local), the live node count, the node's
// current lease and its decisions (limiter.RuleReport).
func (s *Server) limits(w http.ResponseWriter, _ *http.Request) {
	var v any = []any{}
	if s.deps.Limits != nil {
		v = s.deps.Limits()
	}
	writeJSON(w, http.StatusOK, map[string]any{"version": s.deps.Snapshot().Version, "limits": v})
}
