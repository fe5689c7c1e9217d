package breaker

import (
	"fmt"
	"time"

	"github.com/tollgate/tollgate/pipeline"
)

// Settings is the `breaker` setting of a route or a service:
//
//	breaker: {window: 10s, failure_rate: 0.5, min_requests: 100, open_for: 30s, half_open_probes: 5}
type Settings struct {
	Window         time.Duration `yaml:"window"`
	Buckets        int           `yaml:"buckets"`
	FailureRate    float64       `yaml:"failure_rate"`
	MinRequests    int           `yaml:"min_requests"`
	OpenFor        time.Duration `yaml:"open_for"`
	HalfOpenProbes int           `yaml:"half_open_probes"`
	// FailureStatus lists the upstream statuses that count as failures;
	// default every 5xx. Timeouts and connection errors always count.
	FailureStatus []int `yaml:"failure_status"`
}

// Config returns the breaker configuration of the settings.
func (s *Settings) Config() Config {
	return Config{Window: s.Window, Buckets: s.Buckets, FailureRate: s.FailureRate, MinRequests: s.MinRequests,
		OpenFor: s.OpenFor, HalfOpenProbes: s.HalfOpenProbes}
}

// Validate checks the settings.
func (s *Settings) Validate() error {
	if err := s.Config().Validate(); err != nil {
		return err
	}
	for _, st := range s.FailureStatus {
		if st < 100 || st > 999 {
			return fmt.Errorf("breaker.failure_status: %d is not an HTTP status", st)
		}
	}
	return nil
}

// Digest identifies the settings (every field, pipeline.Digest), so that
// state is kept across a reload exactly when they did not change.
func (s *Settings) Digest() string {
	return pipeline.Digest(*s)
}

// Classifier tells from an outcome whether it is a success.
type Classifier struct{ fail [10]uint64 } // bit set of statuses 0..639

// NewClassifier counts the listed statuses as failures, or every 5xx.
func NewClassifier(statuses []int) Classifier {
	var c Classifier
	if len(statuses) == 0 {
		for st := 500; st < 600; st++ {
			c.fail[st/64] |= 1 << (st % 64)
		}
	}
	for _, st := range statuses {
		if st < 640 {
			c.fail[st/64] |= 1 << (st % 64)
		}
	}
	return c
}

// Success reports whether o is a success (it must be Counted).
func (c *Classifier) Success(o *pipeline.Outcome) bool {
	if o.Result != pipeline.ResultOK {
		return false
	}
	st := o.Status
	return st < 0 || st >= 640 || c.fail[st/64]&(1<<(st%64)) == 0
}

// RouteBreaker is a route's breaker as a filter: it refuses while open
// (the route's degraded answer, if any, replaces the refusal) and counts
// the upstream's outcome of every request it let through.
type RouteBreaker struct {
	Name string
	b    *Breaker
	cls  Classifier
}

var errOpen = pipeline.NewCanned(503, "service unavailable: circuit breaker open").WithHeader("Retry-After", "5")

// Breaker returns the route's breaker.
func (r *RouteBreaker) Breaker() *Breaker { return r.b }

// Handle implements pipeline.Filter.
func (r *RouteBreaker) Handle(c *pipeline.Ctx) pipeline.Verdict {
	gen, ok := r.b.Allow()
	if !ok {
		c.Outcome.Result = pipeline.ResultOpen
		c.Decision = "breaker open"
		return c.Reject(errOpen)
	}
	admission.Set(c, admitted{gen: gen, armed: true})
	return pipeline.Continue
}

// admitted is the generation a route's breaker admitted the request in
// (valid while armed), handed back when the outcome is known.
type admitted struct {
	gen   uint64
	armed bool
}

var admission = pipeline.NewSlot[admitted]()

// HandleResponse implements pipeline.ResponseFilter: one outcome per
// client request, whatever retries the upstream step made.
func (r *RouteBreaker) HandleResponse(c *pipeline.Ctx) {
	a := admission.Get(c)
	if !a.armed {
		return
	}
	admission.Clear(c)
	if !c.Outcome.Counted() {
		r.b.Release(a.gen)
		return
	}
	r.b.Done(c.Stripe(), a.gen, r.cls.Success(&c.Outcome))
}

// ForService returns the breaker of a service's breaker setting from the
// reload-surviving state: the same one while the settings stay, a fresh
// one when they change.
func ForService(st *pipeline.StateBuild, service string, s *Settings, now func() time.Time) (*Breaker, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return st.Get("breaker.service|"+service+"|"+s.Digest(), func() (any, func()) {
		return New(s.Config(), now), nil
	}).(*Breaker), nil
}

func init() {
	pipeline.Register(pipeline.Feature{
		Key: "breaker", Stage: pipeline.StageProtect, Scope: pipeline.ScopeRoute,
		Config: func() any { return new(Settings) },
		Build: func(b *pipeline.Build, cfg any) (pipeline.Filter, error) {
			s := cfg.(*Settings)
			if !b.Route.Forwards {
				return nil, fmt.Errorf("breaker applies only to routes that forward")
			}
			if err := s.Validate(); err != nil {
				return nil, err
			}
			br := b.State.Get("breaker.route|"+b.Route.Name+"|"+s.Digest(), func() (any, func()) {
				return New(s.Config(), b.Now), nil
			}).(*Breaker)
			return &RouteBreaker{Name: b.Route.Name, b: br, cls: NewClassifier(s.FailureStatus)}, nil
		},
	})
	pipeline.Register(pipeline.Feature{
		Key: "degrade", Stage: pipeline.StageProtect - 10, Scope: pipeline.ScopeRoute,
		Config: func() any { return new(DegradeSettings) },
		Build: func(b *pipeline.Build, cfg any) (pipeline.Filter, error) {
			return newDegrade(b, cfg.(*DegradeSettings))
		},
	})
}
