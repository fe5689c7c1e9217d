package mirror

import "github.com/tollgate/tollgate/pipeline"

// Figures for /metrics, read when Prometheus scrapes.
var (
	famMirrored = &pipeline.Family{Name: "tollgate_mirror_requests_total",
		Help: "Copies of requests for the route's mirror service, by result: ok (answered), failed (refused, timed out, …), dropped (queue full), skipped (body too large to copy).",
		Type: pipeline.Counter, Labels: []string{"service", "result"}}
	famCompared = &pipeline.Family{Name: "tollgate_mirror_compared_total",
		Help: "Mirror answers compared with the primary's.", Type: pipeline.Counter, Labels: []string{"service"}}
	famDiffers = &pipeline.Family{Name: "tollgate_mirror_differences_total",
		Help: "Mirror answers that differed from the primary's, by what differed (status, body).",
		Type: pipeline.Counter, Labels: []string{"service", "kind"}}
)

// Report implements pipeline.Reporter.
func (m *Filter) Report(emit pipeline.Emit) {
	c := m.Counts()
	svc := m.svc.Name
	emit(famMirrored, float64(c.OK), svc, "ok")
	emit(famMirrored, float64(c.Failed), svc, "failed")
	emit(famMirrored, float64(c.Dropped), svc, "dropped")
	emit(famMirrored, float64(c.Skipped), svc, "skipped")
	if m.compare {
		emit(famCompared, float64(c.Compared), svc)
		emit(famDiffers, float64(c.StatusDiffers), svc, "status")
		emit(famDiffers, float64(c.BodyDiffers), svc, "body")
	}
}
