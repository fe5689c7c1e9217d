package anomaly

import (
	"fmt"
	"math"
	"net/url"
	"time"

	"github.com/tollgate/tollgate/pipeline"
)

// Settings is the top-level `alerts` section:
//
//	alerts:
//	  webhook: https://hooks.example.com/tollgate
//	  headers: {Authorization: "Bearer ${ALERT_TOKEN}"}
//	  auto_degrade: [search]      # routes whose degraded answer goes on while their alert holds
//	  sensitivity: 6
type Settings struct {
	// Off stops the watching (it is on by default: alerts are logged and
	// counted even without a webhook).
	Off bool `yaml:"off"`
	// Webhook is where alerts are POSTed as JSON; none by default.
	Webhook string            `yaml:"webhook"`
	Headers map[string]string `yaml:"headers" secret:"true"`
	// Timeout bounds one POST (default 2s); a failed one is tried again
	// twice, a second apart.
	Timeout time.Duration `yaml:"timeout"`
	// Signals are what is watched: rate, errors, latency (default all).
	Signals []Signal `yaml:"signals"`
	// Sensitivity is how many deviations from the usual figure a
	// departure is (default 6).
	Sensitivity float64 `yaml:"sensitivity"`
	// Interval is how often the figures are read (default 2s); Confirm
	// and Recover how many intervals in a row raise and end an alert
	// (default 3 and 5).
	Interval time.Duration `yaml:"interval"`
	Confirm  int           `yaml:"confirm"`
	Recover  int           `yaml:"recover"`
	// HalfLife is how fast the usual figure follows the route (default
	// 30m); Warmup how long a route is watched before it can alert
	// (default 10m).
	HalfLife time.Duration `yaml:"half_life"`
	Warmup   time.Duration `yaml:"warmup"`
	// MinRate is the requests per second below which a route is not
	// judged (default 1): a handful of requests is noise.
	MinRate float64 `yaml:"min_rate"`
	// AutoDegrade names routes whose degraded answer (their degrade
	// setting) is switched on while one of their alerts holds, and off
	// when it ends — unless an operator switched it on.
	AutoDegrade []string `yaml:"auto_degrade"`
}

// SettingsKey holds the snapshot's Settings for the Engine.
var SettingsKey = pipeline.NewKey[Settings]("anomaly.settings")

func init() {
	pipeline.RegisterSection(pipeline.Section{
		Key:       "alerts",
		Config:    func() any { return new(Settings) },
		Provision: provision,
	})
}

func provision(env *pipeline.Env, cfg any) error {
	s := cfg.(*Settings)
	if s.Webhook != "" {
		u, err := url.Parse(s.Webhook)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("alerts.webhook: %q is not an http(s) URL", s.Webhook)
		}
	}
	setDuration(&s.Timeout, 2*time.Second)
	setDuration(&s.Interval, 2*time.Second)
	setDuration(&s.HalfLife, 30*time.Minute)
	setDuration(&s.Warmup, 10*time.Minute)
	if s.Sensitivity == 0 {
		s.Sensitivity = 6
	}
	if s.Confirm == 0 {
		s.Confirm = 3
	}
	if s.Recover == 0 {
		s.Recover = 5
	}
	if s.MinRate == 0 {
		s.MinRate = 1
	}
	if len(s.Signals) == 0 {
		s.Signals = []Signal{SignalRate, SignalErrors, SignalLatency}
	}
	switch {
	case s.Timeout < 0 || s.Timeout > time.Minute:
		return fmt.Errorf("alerts.timeout %v: from 1ms to 1m", s.Timeout)
	case s.Interval < 100*time.Millisecond || s.Interval > time.Minute:
		return fmt.Errorf("alerts.interval %v: from 100ms to 1m", s.Interval)
	case s.HalfLife < s.Interval:
		return fmt.Errorf("alerts.half_life %v: at least the interval (%v)", s.HalfLife, s.Interval)
	case s.Warmup < 0:
		return fmt.Errorf("alerts.warmup %v must not be negative", s.Warmup)
	case s.Sensitivity < 1 || s.Sensitivity > 100 || math.IsNaN(s.Sensitivity):
		return fmt.Errorf("alerts.sensitivity %v: from 1 to 100 deviations", s.Sensitivity)
	case s.Confirm < 1 || s.Confirm > 100 || s.Recover < 1 || s.Recover > 1000:
		return fmt.Errorf("alerts.confirm (1..100) and alerts.recover (1..1000): %d and %d", s.Confirm, s.Recover)
	case s.MinRate < 0:
		return fmt.Errorf("alerts.min_rate %v must not be negative", s.MinRate)
	}
	seen := map[Signal]bool{}
	for _, sig := range s.Signals {
		if _, ok := shapes[sig]; !ok || seen[sig] {
			return fmt.Errorf("alerts.signals: %q is not rate, errors or latency, or is named twice", sig)
		}
		seen[sig] = true
	}
	names := map[string]bool{}
	for _, r := range s.AutoDegrade {
		if r == "" || names[r] {
			return fmt.Errorf("alerts.auto_degrade: route %q empty or named twice", r)
		}
		names[r] = true
	}
	SettingsKey.Set(env, *s)
	return nil
}

func setDuration(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}

// tuning is what the detectors read of s.
func (s *Settings) tuning() tuning {
	return tuning{
		alpha:       1 - math.Exp2(-float64(s.Interval)/float64(s.HalfLife)),
		sensitivity: s.Sensitivity,
		warm:        int(s.Warmup / s.Interval),
		confirm:     s.Confirm,
		recover:     s.Recover,
	}
}
