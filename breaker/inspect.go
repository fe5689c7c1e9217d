package breaker

import "github.com/tollgate/tollgate/pipeline"

// DegradeStatus is what the admin API shows of a route's degrade step.
type DegradeStatus struct {
	On      bool   `json:"on"`
	Answers uint64 `json:"answers"`
}

// Inspect implements pipeline.Inspector: the route breaker's state.
func (r *RouteBreaker) Inspect(show func(kind string, state any)) {
	show("breaker", r.b.Status())
}

// Inspect implements pipeline.Inspector: the degrade switch and its
// answers.
func (d *Degrade) Inspect(show func(kind string, state any)) {
	show("degrade", DegradeStatus{On: d.On(), Answers: d.Served()})
}

var (
	_ pipeline.Inspector = (*RouteBreaker)(nil)
	_ pipeline.Inspector = (*Degrade)(nil)
	_ pipeline.Switcher  = (*Degrade)(nil)
)
