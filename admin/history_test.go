package admin

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tollgate/tollgate/history"
	"github.com/tollgate/tollgate/observe"
)

// TestHistoryServesTheNodesHours: GET /admin/history gives the node's
// hours (the last ones asked for) as tollgate limits suggest reads them,
// refuses a nonsense window, and says so when no history is kept.
func TestHistoryServesTheNodesHours(t *testing.T) {
	h := history.NewLocal(0)
	now := time.Now().UTC().Truncate(time.Minute)
	h.AddMinute(now.Add(-5*time.Hour), map[string]uint64{"old": 9})
	h.AddMinute(now.Add(-time.Minute), map[string]uint64{"orders": 120})
	h.AddMinute(now, map[string]uint64{"orders": 60})
	d := opsDeps("t0ken", observe.NewMetrics(), nil)
	d.Ops.History = h
	base := serveAdmin(t, d)

	st, body := do(t, "GET", base+"/admin/history?hours=2", "t0ken")
	var got struct {
		Node  string
		Hours []history.Hour
	}
	if err := json.Unmarshal([]byte(body), &got); st != 200 || err != nil {
		t.Fatalf("%d %s %v", st, body, err)
	}
	var orders uint64
	for _, hour := range got.Hours {
		if _, ok := hour.Routes["old"]; ok {
			t.Fatalf("an hour outside the window: %+v", hour)
		}
		orders += hour.Routes["orders"].Requests
	}
	if got.Node != "n1" || orders != 180 {
		t.Fatalf("node %q, orders %d: %s", got.Node, orders, body)
	}
	if st, _ := do(t, "GET", base+"/admin/history?hours=0", "t0ken"); st != 400 {
		t.Fatalf("hours=0: %d", st)
	}
	d.Ops.History = nil
	if st, _ := do(t, "GET", serveAdmin(t, d)+"/admin/history", "t0ken"); st != 404 {
		t.Fatalf("without history: %d", st)
	}
}
