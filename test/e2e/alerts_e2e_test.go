//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
)

// TestTrafficSpikeAlerts: a gateway whose route carries a steady 40
// requests a second, then ten times that for 20 s, POSTs one alert to the
// webhook within 10 s of the surge and one recovery after it; the alert is
// on /metrics and in the dashboard's figures while it holds, and the
// route's degraded answer (auto_degrade) serves meanwhile.
func TestTrafficSpikeAlerts(t *testing.T) {
	t.Parallel() // it mostly waits (for traffic, a registry, processes): beside the others
	var mu sync.Mutex
	type received struct {
		Route, Signal, State string
		Baseline, Observed   float64
		Node                 string
		Degraded             bool
		at                   time.Time
	}
	var got []received
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a received
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &a); err != nil {
			t.Errorf("webhook body %s: %v", body, err)
		}
		a.at = time.Now()
		mu.Lock()
		got = append(got, a)
		mu.Unlock()
	}))
	defer hook.Close()
	up := testutil.StartQuietUpstream(t, `{"items":["x"]}`).Addr
	cfg := writeConfig(t, fmt.Sprintf(`watch: false
alerts:
  webhook: %q
  interval: 1s
  warmup: 8s
  half_life: 5m
  auto_degrade: [search]
services:
  s: {instances: [{addr: %q}]}
routes:
  - name: search
    match: {prefix: /search}
    service: s
    degrade: {status: 200, body: '{"items":[],"degraded":true}'}
`, hook.URL, up))
	addr, admin := freePort(t), freePort(t)
	startProc(t, addr, admin, []string{"TOLLGATE_ADMIN_TOKEN=" + limitsToken}, "run", "-c", cfg)
	base := startPaced([]target{{addr: addr, uri: "/search?q=a", rate: 40}})
	defer base.finish()
	time.Sleep(15 * time.Second) // warmed up, the usual rate learnt
	mu.Lock()
	if len(got) != 0 {
		t.Fatalf("alerts before the surge: %+v", got)
	}
	mu.Unlock()
	surgeAt := time.Now()
	surge := startPaced([]target{{addr: addr, uri: "/search?q=b", rate: 360}})
	waitUntil(t, 15*time.Second, "the alert", func() bool {
		time.Sleep(200 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0
	})
	metrics := string(adminGet(t, admin, "/metrics"))
	live := string(adminGet(t, admin, "/admin/live"))
	degraded := getBody(t, "http://"+addr+"/search?q=c")
	time.Sleep(time.Until(surgeAt.Add(20 * time.Second)))
	surge.finish()
	endAt := time.Now()
	waitUntil(t, 30*time.Second, "the recovery", func() bool {
		time.Sleep(200 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 2
	})
	time.Sleep(2 * time.Second) // nothing more comes
	mu.Lock()
	defer mu.Unlock()
	t.Logf("webhook: %+v", got)
	if len(got) != 2 {
		t.Fatalf("webhook got %d posts, want one alert and one recovery: %+v", len(got), got)
	}
	a, r := got[0], got[1]
	if a.State != "alert" || a.Route != "search" || a.Signal != "rate" || a.Observed < 4*a.Baseline || !a.Degraded || a.Node == "" {
		t.Fatalf("alert %+v", a)
	}
	if took := a.at.Sub(surgeAt); took > 10*time.Second {
		t.Fatalf("alert %v after the surge began", took)
	}
	if r.State != "recovered" || r.at.Before(endAt) {
		t.Fatalf("recovery %+v (surge over at %v)", r, endAt)
	}
	if !strings.Contains(metrics, `tollgate_anomaly_active{route="search",signal="rate"} 1`) || !strings.Contains(metrics, `tollgate_anomaly_alerts_total{signal="rate"} 1`) {
		t.Fatalf("metrics while the alert held lack it:\n%s", grepLines(metrics, "anomaly"))
	}
	if !strings.Contains(live, `"route":"search","signal":"rate","state":"alert"`) {
		t.Fatalf("dashboard figures lack the alert: %s", live)
	}
	if !strings.Contains(degraded, `"degraded":true`) {
		t.Fatalf("the route's answer while the alert held: %s", degraded)
	}
	if after := getBody(t, "http://"+addr+"/search?q=d"); strings.Contains(after, "degraded") {
		t.Fatalf("still degraded after the recovery: %s", after)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func getBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
