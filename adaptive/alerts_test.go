package adaptive

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
)

// TestSpikeAlertsThroughWebhook: a route's traffic learned for 15 simulated
// minutes (an injected clock drives the sampler), then 10× for 20 s: the
// webhook, a real HTTP server, gets one alert within 10 s of the spike
// and one recovery after it, with the route, signal, baseline, observed
// figure and node; nothing else.
func TestSpikeAlertsThroughWebhook(t *testing.T) {
	got := make(chan Alert, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a Alert
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
		if err := json.Unmarshal(body, &a); err != nil || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("webhook body %q: %v", body, err)
		}
		got <- a
	}))
	defer hook.Close()

	env := &pipeline.Env{State: pipeline.NewState(time.Minute).Begin(), Logger: zap.NewNop(), Offline: true}
	if err := provisionAlerts(env, &AlertSettings{Webhook: hook.URL}); err != nil {
		t.Fatal(err)
	}
	a, _ := alertsKey.Get(env)
	defer a.close()
	go a.send.run(a.stop) // the sampler is driven by hand below
	f, err := buildWatch(&pipeline.Build{Env: env, Route: pipeline.RouteInfo{Name: "orders"}}, &WatchSettings{})
	if err != nil || f == nil {
		t.Fatalf("watch filter %v %v", f, err)
	}
	rf := f.(*watchFilter)
	c := pipeline.AcquireParsed(new(fasthttp.Request), new(fasthttp.Response))
	r := rand.New(rand.NewPCG(7, 8))
	clock := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	second := func(rate float64) {
		for range int(poisson(r, rate)) {
			c.Start = time.Now().Add(-5 * time.Millisecond)
			rf.HandleResponse(c)
		}
		clock = clock.Add(time.Second)
		a.sample(clock, time.Second)
	}
	for range 900 {
		second(200)
	}
	spikeAt := clock
	for range 20 {
		second(2000)
	}
	spikeEnd := clock
	var shown []AlertStatus
	a.Inspect(func(kind string, state any) {
		if kind == "alerts" {
			shown = append(shown, state.(AlertStatus))
		}
	})
	if len(shown) != 1 || shown[0].Route != "orders" || shown[0].Signal != "rate" || shown[0].Observed < 1500 {
		t.Fatalf("alerts in progress shown: %+v", shown)
	}
	for range 120 {
		second(200)
	}
	var alerts []Alert
	deadline := time.After(5 * time.Second)
	for len(alerts) < 2 {
		select {
		case al := <-got:
			alerts = append(alerts, al)
		case <-deadline:
			t.Fatalf("webhook got %+v, want a raised and a recovered alert", alerts)
		}
	}
	select {
	case extra := <-got:
		t.Fatalf("a third alert: %+v", extra)
	case <-time.After(200 * time.Millisecond):
	}
	raisedAt, _ := time.Parse(time.RFC3339, alerts[0].At)
	recoveredAt, _ := time.Parse(time.RFC3339, alerts[1].At)
	a0 := alerts[0]
	if a0.Route != "orders" || a0.Signal != "rate" || a0.State != "raised" || a0.Node == "" ||
		a0.Baseline < 180 || a0.Baseline > 220 || a0.Observed < 1500 || raisedAt.Sub(spikeAt) > 10*time.Second {
		t.Fatalf("raised alert %+v (%s into the spike)", a0, raisedAt.Sub(spikeAt))
	}
	if a1 := alerts[1]; a1.State != "recovered" || a1.Signal != "rate" || recoveredAt.Before(spikeEnd) {
		t.Fatalf("recovery %+v", a1)
	}
	var metrics []string
	a.Report(func(f *pipeline.Family, v float64, labels ...string) {
		if f == metricRaised && labels[0] == "rate" && v == 1 {
			metrics = append(metrics, "raised")
		}
		if f == metricAlerting && v != 0 {
			metrics = append(metrics, "still alerting")
		}
	})
	if len(metrics) != 1 || metrics[0] != "raised" {
		t.Fatalf("metrics %v, want one rate alert counted and none alerting", metrics)
	}
}

// TestAlertsSettings: a webhook that is no http URL is refused; without
// a webhook nothing is watched.
func TestAlertsSettings(t *testing.T) {
	env := &pipeline.Env{State: pipeline.NewState(time.Minute).Begin(), Offline: true}
	for _, bad := range []AlertSettings{{Webhook: "ftp://x"}, {Webhook: "http://"}, {Threshold: 5},
		{Webhook: "http://h/", Threshold: 1}} {
		if err := provisionAlerts(env, &bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if err := provisionAlerts(env, &AlertSettings{}); err != nil {
		t.Fatal(err)
	}
	if f, err := buildWatch(&pipeline.Build{Env: env, Route: pipeline.RouteInfo{Name: "r"}}, &WatchSettings{}); f != nil || err != nil {
		t.Fatalf("a filter without alerts: %v %v", f, err)
	}
}

// TestRemovedRouteNotJudged: once a reload's routes serve, a route the
// reload removed is no longer sampled (its traffic stopping is no
// anomaly), while a reload that failed leaves the live routes judged.
func TestRemovedRouteNotJudged(t *testing.T) {
	st := pipeline.NewState(time.Minute)
	build := func(routes ...string) (*Alerts, map[string]*watchFilter, *pipeline.StateBuild) {
		env := &pipeline.Env{State: st.Begin(), Offline: true}
		if err := provisionAlerts(env, &AlertSettings{Webhook: "http://127.0.0.1:1/"}); err != nil {
			t.Fatal(err)
		}
		a, _ := alertsKey.Get(env)
		fs := map[string]*watchFilter{}
		for _, r := range routes {
			f, _ := buildWatch(&pipeline.Build{Env: env, Route: pipeline.RouteInfo{Name: r}}, &WatchSettings{})
			fs[r] = f.(*watchFilter)
		}
		return a, fs, env.State
	}
	a, first, b1 := build("kept", "removed")
	b1.Commit()
	defer a.close()
	c := pipeline.AcquireParsed(new(fasthttp.Request), new(fasthttp.Response))
	first["kept"].HandleResponse(c)
	judged := func() map[string]bool {
		out := map[string]bool{}
		a.mu.Lock()
		defer a.mu.Unlock()
		for r, w := range a.routes {
			out[r] = w.gen >= a.served.Load()
		}
		return out
	}
	if j := judged(); !j["kept"] || !j["removed"] {
		t.Fatalf("first build: %v", j)
	}
	_, _, failed := build("kept", "other")
	failed.Abort()
	if j := judged(); !j["kept"] || !j["removed"] || j["other"] {
		t.Fatalf("after a failed build: %v", j)
	}
	_, second, b3 := build("kept")
	b3.Commit()
	second["kept"].HandleResponse(c)
	if j := judged(); !j["kept"] || j["removed"] {
		t.Fatalf("after the reload served: %v", j)
	}
}

// TestRequestPathFiltersAllocateNothing: the shedding check and the
// anomaly counters cost no allocation per request.
func TestRequestPathFiltersAllocateNothing(t *testing.T) {
	if testutil.Race {
		t.Skip("the race detector allocates")
	}
	env := &pipeline.Env{State: pipeline.NewState(time.Minute).Begin(), Offline: true}
	if err := provisionAlerts(env, &AlertSettings{Webhook: "http://127.0.0.1:1/"}); err != nil {
		t.Fatal(err)
	}
	if err := provisionOverload(env, &OverloadSettings{Lag: &LagThresholds{}}); err != nil {
		t.Fatal(err)
	}
	b := &pipeline.Build{Env: env, Route: pipeline.RouteInfo{Name: "r"}}
	watch, _ := buildWatch(b, &WatchSettings{})
	low := Importance("low")
	shed, _ := buildShed(b, &low)
	c := pipeline.AcquireParsed(new(fasthttp.Request), new(fasthttp.Response))
	if n := testing.AllocsPerRun(1000, func() {
		shed.Handle(c)
		watch.(pipeline.ResponseFilter).HandleResponse(c)
	}); n != 0 {
		t.Fatalf("%.1f allocations per request", n)
	}
}
