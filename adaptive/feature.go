package adaptive

import (
	"errors"

	"github.com/tollgate/tollgate/pipeline"
)

// Scopes of a gate.
const (
	ScopeService = "service"
	ScopeRoute   = "route"
)

// entry is one gate of a snapshot and what it protects.
type entry struct {
	scope, name string
	gate        *Gate
}

// Gates are the concurrency gates of one snapshot, services' first, for
// the reports (/metrics, /admin/limits, the dashboard).
type Gates struct {
	list []entry
}

var gatesKey = pipeline.NewKey[*Gates]("adaptive.gates")

// gateFor returns the gate of scope/name for s from the reload-surviving
// state (the same gate while s stays, with what it learned), listed in
// env's Gates.
func gateFor(env *pipeline.Env, scope, name string, s *Settings) (*Gate, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	g := env.State.Get("adaptive|"+scope+"|"+name+"|"+s.digest(), func() (any, func()) {
		return NewGate(s, env.Now()), nil
	}).(*Gate)
	gates, ok := gatesKey.Get(env)
	if !ok {
		gates = &Gates{}
		gatesKey.Set(env, gates)
	}
	gates.list = append(gates.list, entry{scope: scope, name: name, gate: g})
	return g, nil
}

// ForService returns the gate of a service's `concurrency` setting.
func ForService(env *pipeline.Env, service string, s *Settings) (*Gate, error) {
	return gateFor(env, ScopeService, service, s)
}

// RouteGate is a route's `concurrency` setting as a filter: a slot from
// before the upstream exchange until its outcome is known.
type RouteGate struct{ gate *Gate }

var held = pipeline.NewSlot[Ticket]()

// Handle implements pipeline.Filter.
func (r *RouteGate) Handle(c *pipeline.Ctx) pipeline.Verdict {
	t, ok := r.gate.Acquire(c)
	if !ok {
		return pipeline.Stop
	}
	held.Set(c, t)
	return pipeline.Continue
}

// HandleResponse implements pipeline.ResponseFilter.
func (r *RouteGate) HandleResponse(c *pipeline.Ctx) {
	t := held.Get(c)
	if !t.Held() {
		return
	}
	held.Clear(c)
	r.gate.ReleaseOutcome(c, t)
}

func init() {
	pipeline.Register(pipeline.Feature{
		// After the breaker: a request it refuses takes no slot.
		Key: "concurrency", Stage: pipeline.StageProtect + 5, Scope: pipeline.ScopeRoute,
		Config: func() any { return new(Settings) },
		Build: func(b *pipeline.Build, cfg any) (pipeline.Filter, error) {
			if !b.Route.Forwards {
				return nil, errors.New("concurrency applies only to routes that forward")
			}
			g, err := gateFor(b.Env, ScopeRoute, b.Route.Name, cfg.(*Settings))
			if err != nil {
				return nil, err
			}
			return &RouteGate{gate: g}, nil
		},
	})
}
