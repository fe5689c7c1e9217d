package adaptive

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/internal/stripe"
	"github.com/tollgate/tollgate/pipeline"
)

// Load shedding: when the node's event loops fall behind (their lag, see
// pipeline.LoopLoad, passes a threshold), the requests of the least
// important routes are refused first, before they cost anything but the
// refusal; critical routes last. A loop decides for its own requests by
// its own lag: the loop that is behind is the one whose requests wait.

// Importances a route may carry, least important first.
var importances = [...]string{"low", "normal", "critical"}

// ShedDecision names a refusal by load shedding.
const ShedDecision = "load shed"

// OverloadSettings is the top-level `overload` section:
//
//	overload: {lag: {low: 1ms, normal: 2ms, critical: 50ms}, status: 503, retry_after: 1}
//
// Shedding is on when lag is written; a class left out takes its default.
type OverloadSettings struct {
	Lag        *LagThresholds `yaml:"lag"`
	Status     int            `yaml:"status"`
	RetryAfter int            `yaml:"retry_after"`
}

// LagThresholds are the loop lags above which each importance is shed.
type LagThresholds struct {
	Low      pipeline.Duration `yaml:"low"`
	Normal   pipeline.Duration `yaml:"normal"`
	Critical pipeline.Duration `yaml:"critical"`
}

// Default thresholds: a request's own work on a loop is tens of
// microseconds, so a loop a millisecond behind has dozens waiting; the
// optional traffic goes then, critical routes only once requests wait
// 50 ms, when not all can be served anyway. (bench/RESULTS.md: with 2 ms
// and 5 ms critical requests waited two to three times as long.)
const (
	defaultShedLow      = 1 * time.Millisecond
	defaultShedNormal   = 2 * time.Millisecond
	defaultShedCritical = 50 * time.Millisecond
)

// Shedder is the node's load shedding for one snapshot: the thresholds
// by importance, the refusal, and what was shed.
type Shedder struct {
	at      [len(importances)]time.Duration
	refusal *pipeline.Canned
	shed    [len(importances)]atomic.Uint64
	passed  [len(importances)]atomic.Uint64
	lags    [maxLines]lagCell // the lag each loop's requests last saw
}

type lagCell struct {
	lag atomic.Int64
	_   stripe.Pad
}

var shedderKey = pipeline.NewKey[*Shedder]("adaptive.shedder")

func provisionOverload(env *pipeline.Env, cfg any) error {
	s := cfg.(*OverloadSettings)
	if s.Lag == nil {
		return nil
	}
	l := s.Lag
	for _, d := range []struct {
		p   *pipeline.Duration
		def time.Duration
	}{{&l.Low, defaultShedLow}, {&l.Normal, defaultShedNormal}, {&l.Critical, defaultShedCritical}} {
		if *d.p == 0 {
			*d.p = pipeline.Duration(d.def)
		}
	}
	if s.Status == 0 {
		s.Status = defaultStatus
	}
	if s.RetryAfter == 0 {
		s.RetryAfter = defaultRetry
	}
	switch {
	case l.Low > l.Normal || l.Normal > l.Critical:
		return fmt.Errorf("overload.lag: want low <= normal <= critical, got %s, %s, %s", l.Low.D(), l.Normal.D(), l.Critical.D())
	case l.Critical.D() > time.Minute:
		return fmt.Errorf("overload.lag.critical must be at most 1m")
	case s.Status < 400 || s.Status > 599:
		return fmt.Errorf("overload.status must be a 4xx or 5xx status, got %d", s.Status)
	case s.RetryAfter < 0 || s.RetryAfter > 3600:
		return fmt.Errorf("overload.retry_after must be 1 to 3600 seconds")
	}
	sh := &Shedder{at: [...]time.Duration{l.Low.D(), l.Normal.D(), l.Critical.D()},
		refusal: pipeline.NewCanned(s.Status, ShedDecision).WithHeader("Retry-After", strconv.Itoa(s.RetryAfter))}
	shedderKey.Set(env, sh)
	return nil
}

// Importance is a route's `importance` setting.
type Importance string

// shedFilter refuses a route's requests while their loop's lag is above
// the route's importance's threshold.
type shedFilter struct {
	sh    *Shedder
	class int
	at    time.Duration
}

// Handle implements pipeline.Filter.
func (f *shedFilter) Handle(c *pipeline.Ctx) pipeline.Verdict {
	lag := c.LoopLag()
	if c.Loop != nil {
		if id := c.Loop.ID(); id >= 0 && id < maxLines {
			f.sh.lags[id].lag.Store(int64(lag))
		}
	}
	if lag <= f.at {
		f.sh.passed[f.class].Add(1)
		return pipeline.Continue
	}
	f.sh.shed[f.class].Add(1)
	c.Decision = ShedDecision
	return c.Reject(f.sh.refusal)
}

func buildShed(b *pipeline.Build, cfg any) (pipeline.Filter, error) {
	imp := string(*cfg.(*Importance))
	if imp == "" {
		imp = "normal"
	}
	class := -1
	for i, name := range importances {
		if name == imp {
			class = i
		}
	}
	if class < 0 {
		return nil, fmt.Errorf("importance must be critical, normal or low, got %q", imp)
	}
	sh, ok := shedderKey.Get(b.Env)
	if !ok {
		return nil, nil // no overload section: nothing is shed
	}
	return &shedFilter{sh: sh, class: class, at: sh.at[class]}, nil
}

func init() {
	pipeline.RegisterSection(pipeline.Section{
		Key:       "overload",
		Config:    func() any { return new(OverloadSettings) },
		Provision: provisionOverload,
	})
	pipeline.Register(pipeline.Feature{
		// After the https redirect, before anything that costs: a shed
		// request is refused before auth, limits or the backend.
		Key: "importance", Stage: pipeline.StageChannel + 10, Scope: pipeline.ScopeRoute, Always: true,
		Config: func() any { return new(Importance) },
		Build:  buildShed,
	})
}

var (
	metricShed   = &pipeline.Family{Name: "tollgate_shed_total", Type: pipeline.Counter, Labels: []string{"importance"}, Help: "Requests refused by load shedding, by their route's importance."}
	metricPassed = &pipeline.Family{Name: "tollgate_shed_passed_total", Type: pipeline.Counter, Labels: []string{"importance"}, Help: "Requests load shedding let through, by their route's importance."}
	metricShedAt = &pipeline.Family{Name: "tollgate_shed_threshold_seconds", Type: pipeline.Gauge, Labels: []string{"importance"}, Help: "Loop lag above which a route's requests are shed, by importance."}
	metricLag    = &pipeline.Family{Name: "tollgate_loop_lag_seconds", Type: pipeline.Gauge, Labels: []string{"loop"}, Help: "Smoothed lag of an event loop, as its last request saw it."}
)

// Report implements pipeline.Reporter.
func (sh *Shedder) Report(emit pipeline.Emit) {
	for i, name := range importances {
		emit(metricShed, float64(sh.shed[i].Load()), name)
		emit(metricPassed, float64(sh.passed[i].Load()), name)
		emit(metricShedAt, sh.at[i].Seconds(), name)
	}
	for id := range sh.lags {
		if lag := sh.lags[id].lag.Load(); lag > 0 {
			emit(metricLag, time.Duration(lag).Seconds(), strconv.Itoa(id))
		}
	}
}

// ShedStatus is load shedding as /admin/limits shows it.
type ShedStatus struct {
	Type      string             `json:"type"` // "shedding"
	Threshold map[string]string  `json:"lag_threshold"`
	Shed      map[string]uint64  `json:"shed"`
	Passed    map[string]uint64  `json:"passed"`
	LoopLag   map[string]float64 `json:"loop_lag_ms"`
}

// Inspect implements pipeline.Inspector.
func (sh *Shedder) Inspect(show func(kind string, state any)) {
	st := ShedStatus{Type: "shedding", Threshold: map[string]string{}, Shed: map[string]uint64{},
		Passed: map[string]uint64{}, LoopLag: map[string]float64{}}
	for i, name := range importances {
		st.Threshold[name] = sh.at[i].String()
		st.Shed[name] = sh.shed[i].Load()
		st.Passed[name] = sh.passed[i].Load()
	}
	for id := range sh.lags {
		if lag := sh.lags[id].lag.Load(); lag > 0 {
			st.LoopLag[strconv.Itoa(id)] = ms(time.Duration(lag))
		}
	}
	show("limits", st)
}
