package admin

import (
	"encoding/json"
	"strings"
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

// TestDashboardCarriesItsFiguresInertly: the figures the page carries are
// text a hostile value cannot break out of: a node name (or any string the
// figures hold) with "</script>" stays inside the JSON element.
func TestDashboardCarriesItsFiguresInertly(t *testing.T) {
	d := opsDeps("t0ken", observe.NewMetrics(), nil)
	snap := d.Snapshot()
	snap.File.NodeID = `n</script><script>alert(1)</script>`
	base := serveAdmin(t, d)
	st, page := do(t, "GET", base+"/dashboard", "t0ken")
	if st != 200 {
		t.Fatalf("%d", st)
	}
	if strings.Contains(page, "<script>alert(1)") || strings.Count(page, "</script>") != 2 {
		t.Fatalf("the carried figures broke out of their element:\n%s", page[strings.Index(page, `id="first"`):][:300])
	}
	if !strings.Contains(page, `\u003c/script\u003e\u003cscript\u003ealert(1)`) {
		t.Fatal("the node name is not carried, escaped, in the page's figures")
	}
}
