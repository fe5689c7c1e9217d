package admin

import (
	"net/http"
	"strconv"
	"time"
)

// history serves this node's traffic by route and hour (GET
// /admin/history?hours=N, the last week by default): what tollgate limits
// suggest reads from a node that has no cluster.
func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	h := s.deps.Ops.History
	if h == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "not_kept", "message": "no traffic history: metrics are off on this node"})
		return
	}
	hours := 7 * 24
	if v := r.URL.Query().Get("hours"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 24*365 {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "bad_hours", "message": "hours: a number of hours from 1 to 8760"})
			return
		}
		hours = n
	}
	now := time.Now().UTC()
	since := now.Truncate(time.Hour).Add(-time.Duration(hours-1) * time.Hour)
	var node string
	if snap := s.deps.Snapshot(); snap != nil {
		node = snap.File.NodeID
	}
	writeJSON(w, http.StatusOK, map[string]any{"node": node, "from": since, "to": now, "hours": h.Hours(since)})
}
