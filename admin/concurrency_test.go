package admin

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/config"
	_ "github.com/tollgate/tollgate/features"
	"github.com/tollgate/tollgate/observe"
)

// TestConcurrencyGatesShown: a service's and a route's concurrency gates
// reach /metrics and the dashboard's figures, and load shedding's
// thresholds and counts reach /metrics.
func TestConcurrencyGatesShown(t *testing.T) {
	f, err := config.Parse("t", []byte(`
overload: {lag: {low: 1ms}}
services:
  up:
    instances: [{addr: "127.0.0.1:1"}]
    concurrency: {limit: adaptive, min: 3}
routes:
  - name: items
    match: {prefix: /items}
    service: up
    concurrency: {limit: 16, status: 429}
    importance: low
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	f.Defaults()
	comp := config.NewCompiler()
	t.Cleanup(comp.Close)
	snap, err := comp.Compile(f, "t")
	if err != nil {
		t.Fatal(err)
	}
	d := opsDeps("tok", observe.NewMetrics(), nil)
	d.Snapshot = func() *config.Snapshot { return snap }
	base := serveAdmin(t, d)
	_, metrics := do(t, "GET", base+"/metrics", "")
	for _, want := range []string{
		`tollgate_concurrency_limit{scope="service",name="up"} 3`, // probing at min first
		`tollgate_concurrency_limit{scope="route",name="items"} 16`,
		`tollgate_concurrency_refusals_total{scope="service",name="up"} 0`,
		`tollgate_concurrency_probes_total{scope="service",name="up"} 1`,
		`tollgate_concurrency_rtt_noload_seconds{scope="service",name="up"}`,
		`tollgate_shed_threshold_seconds{importance="low"} 0.001`,
		`tollgate_shed_threshold_seconds{importance="normal"} 0.002`,
		`tollgate_shed_total{importance="critical"} 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(metrics, `tollgate_concurrency_probes_total{scope="route"`) {
		t.Error("a fixed limit reports probes")
	}
	st, body := do(t, "GET", base+"/admin/live", "tok")
	var live struct {
		Concurrency []map[string]any `json:"concurrency"`
	}
	if err := json.Unmarshal([]byte(body), &live); st != 200 || err != nil || len(live.Concurrency) != 2 {
		t.Fatalf("live %d: %v %s", st, err, body)
	}
	if g := live.Concurrency[1]; g["name"] != "items" || g["limit"] != 16.0 || g["status"] != 429.0 || g["adaptive"] != false {
		t.Fatalf("route gate %v", g)
	}
}
