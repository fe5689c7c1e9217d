package upstream

import (
	"errors"
	"time"

	"github.com/tollgate/tollgate/pipeline"
)

// RouteTimeouts is a route's `timeouts` setting: its own budget for the
// upstream exchange, retry included, when shorter than the service's
// total (the sooner of the two applies).
//
//	timeouts: {total: 800ms}
type RouteTimeouts struct {
	Total time.Duration `yaml:"total"`
}

// routeDeadline sets the request's deadline from the route's budget.
type routeDeadline struct{ total time.Duration }

func (d routeDeadline) Handle(c *pipeline.Ctx) pipeline.Verdict {
	c.Deadline = c.Start.Add(d.total)
	return pipeline.Continue
}

func init() {
	pipeline.Register(pipeline.Feature{
		Key: "timeouts", Stage: pipeline.StageProtect + 10, Scope: pipeline.ScopeRoute,
		Config: func() any { return new(RouteTimeouts) },
		Build: func(b *pipeline.Build, cfg any) (pipeline.Filter, error) {
			t := cfg.(*RouteTimeouts)
			switch {
			case !b.Route.Forwards:
				return nil, errors.New("timeouts apply only to routes that forward")
			case t.Total <= 0 || t.Total > 10*time.Minute:
				return nil, errors.New("timeouts.total must be between 0 and 10m")
			}
			return routeDeadline{total: t.Total}, nil
		},
	})
}
