package adaptive

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/pipeline"
	"go.uber.org/zap"
)

// AlertSettings is the top-level `alerts` section:
//
//	alerts: {webhook: "https://hooks.example.com/tollgate", threshold: 6}
//
// Detection is on when webhook is written.
type AlertSettings struct {
	Webhook string `yaml:"webhook"`
	// Threshold is how many spreads from its baseline a signal must be
	// to count as outside.
	Threshold float64 `yaml:"threshold"`
}

const (
	defaultAlertThreshold = 6
	// The least spread each signal is judged by: a request a second, half
	// a percentage point of errors, half a millisecond.
	floorRate    = 1
	floorErrors  = 0.005
	floorLatency = 0.5
	// Error rate and latency are judged only on seconds with this many
	// requests: a second of two requests, one failed, is no signal.
	minRequests = 20
)

// signals names what is watched per route, in baseline order.
var signals = [...]string{"rate", "error_rate", "latency_ms"}

// routeWatch is one route's counters (added to on the request path) and
// baselines (the sampler's).
type routeWatch struct {
	requests, errors atomic.Uint64
	latencyUS        atomic.Uint64
	base             [len(signals)]baseline
	gen              uint64 // the last build that had the route (Alerts.mu)
}

// Alerts watches the routes and raises alerts: a log line, a metric and
// a webhook call. It outlives reloads while its settings stay, so the
// baselines keep what they learned.
type Alerts struct {
	webhook   string
	threshold float64
	node      string
	logger    *zap.Logger
	send      *webhookSender

	key string // the State key of the settings, for the routes' keys

	mu     sync.Mutex
	routes map[string]*routeWatch
	gen    uint64 // builds so far
	// served is the newest build whose routes served a request: the
	// routes of the live configuration are those of a build at least as
	// new (a failed build never serves, a reload's first request marks it).
	served atomic.Uint64

	raisedTotal [len(signals)]atomic.Uint64
	alerting    [len(signals)]atomic.Int64
	stop        chan struct{}
	stopped     sync.Once
}

var alertsKey = pipeline.NewKey[*Alerts]("adaptive.alerts")

func newAlerts(key string, s *AlertSettings, logger *zap.Logger) *Alerts {
	node, _ := os.Hostname()
	return &Alerts{key: key, webhook: s.Webhook, threshold: s.Threshold, node: node, logger: logger,
		send: newWebhookSender(s.Webhook, logger), routes: map[string]*routeWatch{}, stop: make(chan struct{})}
}

func provisionAlerts(env *pipeline.Env, cfg any) error {
	s := cfg.(*AlertSettings)
	if s.Webhook == "" {
		if s.Threshold != 0 {
			return errors.New("alerts: threshold without a webhook")
		}
		return nil
	}
	if u, err := url.Parse(s.Webhook); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("alerts.webhook must be an http or https URL, got %q", s.Webhook)
	}
	if s.Threshold == 0 {
		s.Threshold = defaultAlertThreshold
	}
	if s.Threshold < 2 || s.Threshold > 100 {
		return errors.New("alerts.threshold must be between 2 and 100")
	}
	logger := env.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	key := "adaptive.alerts|" + pipeline.Digest(*s)
	a := env.State.Get(key, func() (any, func()) {
		a := newAlerts(key, s, logger)
		if !env.Offline {
			go a.run(time.Second)
			go a.send.run(a.stop)
		}
		return a, a.close
	}).(*Alerts)
	a.mu.Lock()
	a.gen++
	a.mu.Unlock()
	alertsKey.Set(env, a)
	return nil
}

func (a *Alerts) close() { a.stopped.Do(func() { close(a.stop) }) }

// watch returns the route's counters and baselines, kept across reloads
// while the route is (st), and the build's generation.
func (a *Alerts) watch(st *pipeline.StateBuild, route string) (*routeWatch, uint64) {
	w := st.Get(a.key+"|"+route, func() (any, func()) {
		w := &routeWatch{}
		w.base[0].floor, w.base[1].floor, w.base[2].floor = floorRate, floorErrors, floorLatency
		a.mu.Lock()
		a.routes[route] = w
		a.mu.Unlock()
		return w, func() {
			a.mu.Lock()
			if a.routes[route] == w {
				delete(a.routes, route)
			}
			a.mu.Unlock()
		}
	}).(*routeWatch)
	a.mu.Lock()
	defer a.mu.Unlock()
	w.gen = a.gen
	return w, a.gen
}

func (a *Alerts) run(every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-a.stop:
			return
		case now := <-tick.C:
			a.sample(now, every)
		}
	}
}

// sample takes one second's figures of every route of the live
// configuration and judges them.
func (a *Alerts) sample(now time.Time, every time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	served := a.served.Load()
	for route, w := range a.routes {
		if w.gen < served {
			continue // not in the live configuration (removed, its state not yet let go)
		}
		n := float64(w.requests.Swap(0))
		errs := float64(w.errors.Swap(0))
		lat := float64(w.latencyUS.Swap(0))
		values := [len(signals)]float64{n / every.Seconds()}
		judged := [len(signals)]bool{true, n >= minRequests, n >= minRequests}
		if n > 0 {
			values[1], values[2] = errs/n, lat/n/1000
		}
		for i := range signals {
			if !judged[i] {
				continue
			}
			b := &w.base[i]
			mean := b.mean
			switch b.observe(values[i], a.threshold) {
			case raised:
				a.raisedTotal[i].Add(1)
				a.alerting[i].Add(1)
				a.alert(now, route, i, "raised", mean, values[i])
			case recovered:
				a.alerting[i].Add(-1)
				a.alert(now, route, i, "recovered", mean, values[i])
			}
		}
	}
}

// Alert is the webhook's JSON body.
type Alert struct {
	Route    string  `json:"route"`
	Signal   string  `json:"signal"`
	State    string  `json:"state"` // raised or recovered
	Baseline float64 `json:"baseline"`
	Observed float64 `json:"observed"`
	Node     string  `json:"node"`
	At       string  `json:"at"`
}

func (a *Alerts) alert(now time.Time, route string, signal int, state string, base, observed float64) {
	al := Alert{Route: route, Signal: signals[signal], State: state, Baseline: base, Observed: observed,
		Node: a.node, At: now.UTC().Format(time.RFC3339)}
	a.logger.Warn("ALERT traffic anomaly "+state, zap.String("route", route), zap.String("signal", al.Signal),
		zap.Float64("baseline", base), zap.Float64("observed", observed))
	a.send.enqueue(al)
}

// watchFilter counts a route's requests for its baselines.
type watchFilter struct {
	w   *routeWatch
	a   *Alerts
	gen uint64
}

// Handle implements pipeline.Filter.
func (f *watchFilter) Handle(*pipeline.Ctx) pipeline.Verdict { return pipeline.Continue }

// HandleResponse implements pipeline.ResponseFilter.
func (f *watchFilter) HandleResponse(c *pipeline.Ctx) {
	for {
		if served := f.a.served.Load(); served >= f.gen || f.a.served.CompareAndSwap(served, f.gen) {
			break
		}
	}
	f.w.requests.Add(1)
	if c.Resp.StatusCode() >= 500 {
		f.w.errors.Add(1)
	}
	f.w.latencyUS.Add(uint64(max(c.Now().Sub(c.Start).Microseconds(), 0)))
}

// WatchSettings is a route's `anomaly` setting: `anomaly: {watch: false}`
// leaves the route out of detection.
type WatchSettings struct {
	Watch *bool `yaml:"watch"`
}

func buildWatch(b *pipeline.Build, cfg any) (pipeline.Filter, error) {
	s := cfg.(*WatchSettings)
	a, ok := alertsKey.Get(b.Env)
	if !ok || (s.Watch != nil && !*s.Watch) {
		return nil, nil
	}
	w, gen := a.watch(b.State, b.Route.Name)
	return &watchFilter{w: w, a: a, gen: gen}, nil
}

func init() {
	pipeline.RegisterSection(pipeline.Section{
		Key:       "alerts",
		Config:    func() any { return new(AlertSettings) },
		Provision: provisionAlerts,
	})
	pipeline.Register(pipeline.Feature{
		Key: "anomaly", Stage: pipeline.StageMark + 10, Scope: pipeline.ScopeRoute, Always: true,
		Config: func() any { return new(WatchSettings) },
		Build:  buildWatch,
	})
}

var (
	metricAlerting = &pipeline.Family{Name: "tollgate_anomaly_alerting", Type: pipeline.Gauge, Labels: []string{"signal"}, Help: "Routes whose signal is in an anomaly alert now."}
	metricRaised   = &pipeline.Family{Name: "tollgate_anomaly_alerts_total", Type: pipeline.Counter, Labels: []string{"signal"}, Help: "Anomaly alerts raised."}
	metricHookFail = &pipeline.Family{Name: "tollgate_anomaly_webhook_failures_total", Type: pipeline.Counter, Help: "Alerts the webhook did not take (an error, a status >= 300, or a full queue)."}
)

// Report implements pipeline.Reporter.
func (a *Alerts) Report(emit pipeline.Emit) {
	for i, name := range signals {
		emit(metricAlerting, float64(a.alerting[i].Load()), name)
		emit(metricRaised, float64(a.raisedTotal[i].Load()), name)
	}
	emit(metricHookFail, float64(a.send.failures.Load()))
}

// AlertStatus is one alert in progress, as the dashboard shows it.
type AlertStatus struct {
	Route    string  `json:"route"`
	Signal   string  `json:"signal"`
	Baseline float64 `json:"baseline"`
	Observed float64 `json:"observed"`
}

// Inspect implements pipeline.Inspector: each alert in progress, as
// "alerts" (the dashboard).
func (a *Alerts) Inspect(show func(kind string, state any)) {
	a.mu.Lock()
	var out []AlertStatus
	served := a.served.Load()
	for route, w := range a.routes {
		for i := range w.base {
			if b := &w.base[i]; b.alerting && w.gen >= served {
				out = append(out, AlertStatus{Route: route, Signal: signals[i], Baseline: b.mean, Observed: b.last})
			}
		}
	}
	a.mu.Unlock()
	slices.SortFunc(out, func(x, y AlertStatus) int { return strings.Compare(x.Route+x.Signal, y.Route+y.Signal) })
	for _, st := range out {
		show("alerts", st)
	}
}
