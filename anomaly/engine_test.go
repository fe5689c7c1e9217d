package anomaly

import (
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/observe"
	"github.com/tollgate/tollgate/pipeline"
)

// traffic is a route's running totals, advanced by a rate.
type traffic struct {
	total, errs float64
}

func (tr *traffic) advance(rate, errShare, seconds float64) {
	tr.total += rate * seconds
	tr.errs += rate * seconds * errShare
}

func (tr *traffic) figures(name string) observe.RouteFigures {
	var f observe.RouteFigures
	f.Name = name
	f.ByClass[5] = uint64(tr.errs)
	f.ByClass[2] = uint64(tr.total) - f.ByClass[5]
	return f
}

func settings(t *testing.T, s Settings) Settings {
	t.Helper()
	if err := provision(&pipeline.Env{}, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

type collected struct {
	mu     sync.Mutex
	alerts []Alert
}

func (c *collected) send(a Alert, _ Settings) {
	c.mu.Lock()
	c.alerts = append(c.alerts, a)
	c.mu.Unlock()
}

// TestSpikeRaisesOneAlertAndOneRecovery: a route steady at 100 req/s (with
// noise) that takes ten times that for 20 s raises one rate alert within
// 10 s of the surge, and one recovery once it is over.
func TestSpikeRaisesOneAlertAndOneRecovery(t *testing.T) {
	s := settings(t, Settings{})
	rng := rand.New(rand.NewPCG(1, 2))
	var tr traffic
	got := &collected{}
	e := &Engine{Routes: func() []observe.RouteFigures { return []observe.RouteFigures{tr.figures("orders")} },
		Settings: func() Settings { return s }, Send: got.send, Node: "n1"}
	start := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	step := s.Interval.Seconds()
	surge, surgeEnd := start.Add(time.Hour), start.Add(time.Hour+20*time.Second)
	for now := start; now.Before(start.Add(time.Hour + 5*time.Minute)); now = now.Add(s.Interval) {
		rate := 100 * (0.9 + 0.2*rng.Float64())
		if !now.Before(surge.Add(s.Interval)) && !now.After(surgeEnd) {
			rate *= 10
		}
		tr.advance(rate, 0.001, step)
		e.Step(now)
	}
	if len(got.alerts) != 2 {
		t.Fatalf("alerts %+v", got.alerts)
	}
	a, r := got.alerts[0], got.alerts[1]
	if a.State != "alert" || a.Signal != SignalRate || a.Route != "orders" || a.Node != "n1" {
		t.Fatalf("alert %+v", a)
	}
	if took := a.At.Sub(surge); took <= 0 || took > 10*time.Second {
		t.Fatalf("raised %v after the surge began", took)
	}
	if math.Abs(a.Baseline-100) > 10 || a.Observed < 900 {
		t.Fatalf("baseline %.1f, observed %.1f", a.Baseline, a.Observed)
	}
	if r.State != "recovered" || r.At.Before(surgeEnd) || r.At.Sub(surgeEnd) > 30*time.Second {
		t.Fatalf("recovery %+v (surge ended %v)", r, surgeEnd)
	}
	if f := e.Figures(); len(f.Active) != 0 || f.Raised[SignalRate] != 1 {
		t.Fatalf("figures %+v", f)
	}
}

// TestADayRaisesNothing: a simulated day of traffic that rises and falls
// by 60 % around its mean, with noise and a slowly rising error share,
// raises no alert.
func TestADayRaisesNothing(t *testing.T) {
	s := settings(t, Settings{})
	rng := rand.New(rand.NewPCG(3, 4))
	var tr traffic
	got := &collected{}
	e := &Engine{Routes: func() []observe.RouteFigures { return []observe.RouteFigures{tr.figures("search")} },
		Settings: func() Settings { return s }, Send: got.send}
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	step := s.Interval.Seconds()
	for now := start; now.Before(start.Add(24 * time.Hour)); now = now.Add(s.Interval) {
		day := now.Sub(start).Hours() / 24
		rate := 200 * (1 + 0.6*math.Sin(2*math.Pi*day)) * (0.9 + 0.2*rng.Float64())
		tr.advance(rate, 0.002+0.01*day, step)
		e.Step(now)
	}
	if len(got.alerts) != 0 {
		t.Fatalf("%d false alarms, the first %+v", len(got.alerts), got.alerts[0])
	}
}

// TestErrorsAlertAndAutoDegrade: a route whose errors jump from 1 % to
// 40 % raises an errors alert; listed in auto_degrade, its degraded answer
// goes on, and off with the recovery; one an operator switched on stays.
func TestErrorsAlertAndAutoDegrade(t *testing.T) {
	s := settings(t, Settings{AutoDegrade: []string{"pay"}, Warmup: time.Minute})
	var tr traffic
	sw := &switchState{}
	got := &collected{}
	e := &Engine{Routes: func() []observe.RouteFigures { return []observe.RouteFigures{tr.figures("pay")} },
		Settings: func() Settings { return s }, Send: got.send,
		Degrade: func(route string) pipeline.Switcher {
			if route == "pay" {
				return sw
			}
			return nil
		}}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	run := func(d time.Duration, errShare float64) {
		for end := now.Add(d); now.Before(end); now = now.Add(s.Interval) {
			tr.advance(50, errShare, s.Interval.Seconds())
			e.Step(now)
		}
	}
	run(10*time.Minute, 0.01)
	run(30*time.Second, 0.4)
	if len(got.alerts) != 1 || got.alerts[0].Signal != SignalErrors || !got.alerts[0].Degraded || !sw.on {
		t.Fatalf("alerts %+v, degraded %v", got.alerts, sw.on)
	}
	run(time.Minute, 0.01)
	if len(got.alerts) != 2 || got.alerts[1].State != "recovered" || sw.on {
		t.Fatalf("after: alerts %+v, degraded %v", got.alerts, sw.on)
	}
	// Switched on by an operator: the engine leaves it on.
	sw.on = true
	run(30*time.Second, 0.4)
	run(time.Minute, 0.01)
	if len(got.alerts) != 4 || got.alerts[2].Degraded || !sw.on {
		t.Fatalf("operator's switch: alerts %+v, on %v", got.alerts, sw.on)
	}
}

type switchState struct{ on bool }

func (s *switchState) Switch(on bool) bool { was := s.on; s.on = on; return was }

// TestWebhookPostsEachAlert: alerts reach a real HTTP receiver as JSON with
// the configured headers; one that fails is tried again.
func TestWebhookPostsEachAlert(t *testing.T) {
	var mu sync.Mutex
	var got []Alert
	fails := 1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if fails > 0 {
			fails--
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		var a Alert
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &a); err != nil || r.Header.Get("X-Key") != "k" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("body %s, headers %v: %v", body, r.Header, err)
		}
		got = append(got, a)
	}))
	defer srv.Close()
	s := settings(t, Settings{Webhook: srv.URL, Headers: map[string]string{"X-Key": "k"}})
	stop := make(chan struct{})
	defer close(stop)
	w := &Webhook{}
	w.Start(stop)
	w.Send(Alert{Route: "a", Signal: SignalRate, State: "alert", Observed: 1000, Baseline: 100}, s)
	w.Send(Alert{Route: "a", Signal: SignalRate, State: "recovered"}, s)
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0].State != "alert" || got[0].Observed != 1000 || got[1].State != "recovered" {
		t.Fatalf("received %+v", got)
	}
	if f := w.Figures(); f.Sent != 2 || f.Failed != 0 {
		t.Fatalf("figures %+v", f)
	}
}

// TestSettingsRefused: what cannot work is refused with its name.
func TestSettingsRefused(t *testing.T) {
	for _, s := range []Settings{
		{Webhook: "ftp://x"}, {Webhook: "http://"}, {Interval: time.Millisecond}, {Sensitivity: 0.5},
		{Signals: []Signal{"cpu"}}, {Signals: []Signal{SignalRate, SignalRate}}, {AutoDegrade: []string{"a", "a"}},
		{HalfLife: time.Second, Interval: 2 * time.Second},
	} {
		if err := provision(&pipeline.Env{}, &s); err == nil {
			t.Errorf("%+v accepted", s)
		}
	}
}

// TestLatencyNeedsARealStep: a p99 of half a millisecond that jumps to a
// few (a busy host) raises nothing; one of 10 ms that jumps to 100 does.
func TestLatencyNeedsARealStep(t *testing.T) {
	s := settings(t, Settings{Warmup: time.Minute})
	tu := s.tuning()
	for _, c := range []struct {
		usual, jump float64
		alert       bool
	}{{0.5, 4.5, false}, {10, 100, true}} {
		d := &detector{signal: SignalLatency}
		for range 100 {
			d.observe(c.usual, &tu, true)
		}
		raisedAny := false
		for range 10 {
			raisedAny = raisedAny || d.observe(c.jump, &tu, true) == raised
		}
		if raisedAny != c.alert {
			t.Errorf("p99 %v ms → %v ms: alert %v, want %v", c.usual, c.jump, raisedAny, c.alert)
		}
	}
}
