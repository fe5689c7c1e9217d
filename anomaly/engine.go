package anomaly

import (
	"slices"
	"sync"
	"time"

	"github.com/tollgate/tollgate/observe"
	"github.com/tollgate/tollgate/pipeline"
	"go.uber.org/zap"
)

// Alert is an alert raised or ended: what the log, the dashboard and the
// webhook say.
type Alert struct {
	Route  string `json:"route"`
	Signal Signal `json:"signal"`
	// State is "alert" when raised, "recovered" when over.
	State string `json:"state"`
	// Baseline is the route's usual figure, Observed the interval's,
	// Bound the figure past which it departs (requests per second, a
	// share of answers, or milliseconds, by Signal).
	Baseline float64   `json:"baseline"`
	Observed float64   `json:"observed"`
	Bound    float64   `json:"bound"`
	Node     string    `json:"node"`
	At       time.Time `json:"at"`
	// Degraded says the route's degraded answer was switched on (or,
	// recovered, off) for it.
	Degraded bool `json:"degraded,omitempty"`
}

// Engine watches the routes of the running configuration.
type Engine struct {
	// Routes reads every route's running totals (the metrics).
	Routes func() []observe.RouteFigures
	// Settings returns the running configuration's alerts section.
	Settings func() Settings
	// Degrade finds a route's degraded answer switch (nil: none).
	Degrade func(route string) pipeline.Switcher
	Node    string
	Log     *zap.Logger
	// Send takes alerts for the webhook (nil: none sent).
	Send func(Alert, Settings)

	mu       sync.Mutex
	routes   map[string]*watched
	lastAt   time.Time
	active   map[string]Alert // route + "/" + signal
	raised   map[Signal]uint64
	switched map[string]bool // routes whose degraded answer this engine switched on
}

// watched is one route's last totals and its detectors.
type watched struct {
	requests, errors uint64
	latency          observe.HistogramSnapshot
	seenAt           time.Time
	detectors        map[Signal]*detector
}

// minJudged is the fewest requests in an interval whose error share or
// latency is judged.
const minJudged = 10

// Run reads the figures every interval until stop is closed.
func (e *Engine) Run(stop <-chan struct{}) {
	for {
		s := e.Settings()
		t := time.NewTimer(s.Interval)
		select {
		case <-stop:
			t.Stop()
			return
		case now := <-t.C:
			if !s.Off {
				e.Step(now)
			}
		}
	}
}

// Step reads the figures once, as of now.
func (e *Engine) Step(now time.Time) {
	s := e.Settings()
	t := s.tuning()
	figures := e.Routes()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.routes == nil {
		e.routes, e.active, e.raised, e.switched = map[string]*watched{}, map[string]Alert{}, map[Signal]uint64{}, map[string]bool{}
	}
	dt := now.Sub(e.lastAt).Seconds()
	first := e.lastAt.IsZero()
	e.lastAt = now
	present := make(map[string]bool, len(figures))
	for _, f := range figures {
		present[f.Name] = true
		var requests uint64
		for _, n := range f.ByClass {
			requests += n
		}
		w := e.routes[f.Name]
		if w == nil || first || requests < w.requests {
			// New, or its series made anew by a reload: start from here.
			w = &watched{detectors: map[Signal]*detector{}, seenAt: now}
			e.routes[f.Name] = w
			w.requests, w.errors, w.latency = requests, f.ByClass[5], f.Latency
			continue
		}
		dReq, dErr := requests-w.requests, f.ByClass[5]-w.errors
		dLat := f.Latency.Sub(&w.latency)
		w.requests, w.errors, w.latency = requests, f.ByClass[5], f.Latency
		if dt <= 0 {
			continue
		}
		rate := float64(dReq) / dt
		for _, sig := range s.Signals {
			d := w.detectors[sig]
			if d == nil {
				d = &detector{signal: sig}
				w.detectors[sig] = d
			}
			var x float64
			judge := rate >= s.MinRate
			switch sig {
			case SignalRate:
				x = rate
			case SignalErrors, SignalLatency:
				if dReq < minJudged || rate < s.MinRate {
					if !d.active {
						continue // too few requests to tell anything
					}
					judge = false
				}
				if sig == SignalErrors {
					x = float64(dErr) / float64(max(dReq, 1))
				} else {
					x = float64(dLat.Quantile(0.99).Microseconds()) / 1000
				}
			}
			switch d.observe(x, &t, judge) {
			case raised:
				e.raise(f.Name, d, x, now, s)
			case recovered:
				e.recover(f.Name, d, x, now, s)
			}
		}
	}
	for name, w := range e.routes {
		if present[name] {
			continue
		}
		// The route is gone (a reload): its alerts end with it.
		for _, d := range w.detectors {
			if d.active {
				e.recover(name, d, 0, now, s)
			}
		}
		delete(e.routes, name)
	}
}

func (e *Engine) raise(route string, d *detector, x float64, now time.Time, s Settings) {
	a := Alert{Route: route, Signal: d.signal, State: "alert", Baseline: d.mean, Observed: x, Bound: d.bound(s.Sensitivity), Node: e.Node, At: now}
	if slices.Contains(s.AutoDegrade, route) && e.Degrade != nil {
		if sw := e.Degrade(route); sw != nil {
			if !sw.Switch(true) {
				e.switched[route] = true
			}
			a.Degraded = e.switched[route]
		} else if e.Log != nil {
			e.Log.Warn("anomaly: auto_degrade names a route without a degrade answer", zap.String("route", route))
		}
	}
	e.active[route+"/"+string(d.signal)] = a
	e.raised[d.signal]++
	if e.Log != nil {
		e.Log.Warn("anomaly: alert", zap.String("route", route), zap.String("signal", string(d.signal)),
			zap.Float64("baseline", a.Baseline), zap.Float64("observed", x), zap.Float64("bound", a.Bound), zap.Bool("degraded", a.Degraded))
	}
	if e.Send != nil {
		e.Send(a, s)
	}
}

func (e *Engine) recover(route string, d *detector, x float64, now time.Time, s Settings) {
	delete(e.active, route+"/"+string(d.signal))
	a := Alert{Route: route, Signal: d.signal, State: "recovered", Baseline: d.mean, Observed: x, Bound: d.bound(s.Sensitivity), Node: e.Node, At: now}
	if e.switched[route] && !e.routeActive(route) {
		if sw := e.Degrade(route); sw != nil {
			sw.Switch(false)
		}
		delete(e.switched, route)
		a.Degraded = true
	}
	if e.Log != nil {
		e.Log.Info("anomaly: recovered", zap.String("route", route), zap.String("signal", string(d.signal)),
			zap.Float64("baseline", a.Baseline), zap.Float64("observed", x), zap.Bool("degrade_off", a.Degraded))
	}
	if e.Send != nil {
		e.Send(a, s)
	}
}

func (e *Engine) routeActive(route string) bool {
	for _, a := range e.active {
		if a.Route == route {
			return true
		}
	}
	return false
}

// Figures are the alerts for /metrics and the dashboard.
type Figures struct {
	Active []Alert           // holding now, by route and signal
	Raised map[Signal]uint64 // since the start
}

// Figures reads the engine's alerts.
func (e *Engine) Figures() Figures {
	e.mu.Lock()
	defer e.mu.Unlock()
	f := Figures{Raised: map[Signal]uint64{}}
	for _, a := range e.active {
		f.Active = append(f.Active, a)
	}
	for k, v := range e.raised {
		f.Raised[k] = v
	}
	slices.SortFunc(f.Active, func(a, b Alert) int {
		if a.Route != b.Route {
			if a.Route < b.Route {
				return -1
			}
			return 1
		}
		if a.Signal < b.Signal {
			return -1
		}
		return 1
	})
	return f
}
