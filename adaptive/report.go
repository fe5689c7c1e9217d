package adaptive

import (
	"time"

	"github.com/tollgate/tollgate/pipeline"
)

// Metric families of the gates (pipeline.Reporter), labelled by scope
// (service or route) and name.
var (
	labels        = []string{"scope", "name"}
	metricLimit   = &pipeline.Family{Name: "tollgate_concurrency_limit", Type: pipeline.Gauge, Labels: labels, Help: "Requests a concurrency gate lets in flight on this node."}
	metricFlight  = &pipeline.Family{Name: "tollgate_concurrency_in_flight", Type: pipeline.Gauge, Labels: labels, Help: "Requests in flight through a concurrency gate."}
	metricWaiting = &pipeline.Family{Name: "tollgate_concurrency_waiting", Type: pipeline.Gauge, Labels: labels, Help: "Requests waiting for a slot of a concurrency gate."}
	metricRTTZero = &pipeline.Family{Name: "tollgate_concurrency_rtt_noload_seconds", Type: pipeline.Gauge, Labels: labels, Help: "Estimated no-load latency of the backend behind an adaptive gate."}
	metricRTT     = &pipeline.Family{Name: "tollgate_concurrency_rtt_seconds", Type: pipeline.Gauge, Labels: labels, Help: "Mean latency of the last sample window of a concurrency gate."}
	metricAdmit   = &pipeline.Family{Name: "tollgate_concurrency_admitted_total", Type: pipeline.Counter, Labels: labels, Help: "Requests a concurrency gate admitted."}
	metricWaited  = &pipeline.Family{Name: "tollgate_concurrency_waited_total", Type: pipeline.Counter, Labels: labels, Help: "Requests a concurrency gate admitted after waiting for a slot."}
	metricRefused = &pipeline.Family{Name: "tollgate_concurrency_refusals_total", Type: pipeline.Counter, Labels: labels, Help: "Requests a concurrency gate refused after max_wait."}
	metricProbes  = &pipeline.Family{Name: "tollgate_concurrency_probes_total", Type: pipeline.Counter, Labels: labels, Help: "Times an adaptive gate measured the backend's no-load latency again."}
)

// Report implements pipeline.Reporter (read at scrape time).
func (gs *Gates) Report(emit pipeline.Emit) {
	for _, e := range gs.list {
		st := e.gate.Status()
		emit(metricLimit, float64(st.Limit), e.scope, e.name)
		emit(metricFlight, float64(st.InFlight), e.scope, e.name)
		emit(metricWaiting, float64(st.Waiting), e.scope, e.name)
		emit(metricRTT, st.rtt.Seconds(), e.scope, e.name)
		emit(metricAdmit, float64(st.Admitted), e.scope, e.name)
		emit(metricWaited, float64(st.Waited), e.scope, e.name)
		emit(metricRefused, float64(st.Refused), e.scope, e.name)
		if st.Adaptive {
			emit(metricRTTZero, st.rttZero.Seconds(), e.scope, e.name)
			emit(metricProbes, float64(st.Probes), e.scope, e.name)
		}
	}
}

// Status is a gate as /admin/limits and the dashboard show it.
type Status struct {
	Type     string  `json:"type"` // "concurrency", beside the rate limits' rules
	Scope    string  `json:"scope"`
	Name     string  `json:"name"`
	Adaptive bool    `json:"adaptive"`
	Limit    int64   `json:"limit"`
	Min      int     `json:"min,omitempty"`
	Max      int     `json:"max,omitempty"`
	InFlight int64   `json:"in_flight"`
	Waiting  int64   `json:"waiting"`
	RTTZero  float64 `json:"rtt_noload_ms,omitempty"`
	RTT      float64 `json:"rtt_ms"`
	Probing  bool    `json:"probing,omitempty"`
	Probes   uint64  `json:"probes,omitempty"`
	MaxWait  string  `json:"max_wait"`
	Status   int     `json:"status"`
	// Decisions on this node since the gate was made.
	Admitted uint64 `json:"admitted"`
	Waited   uint64 `json:"waited"`
	Refused  uint64 `json:"refused"`

	rtt, rttZero time.Duration
}

// Status reads the gate's state.
func (g *Gate) Status() Status {
	e := g.est
	st := Status{Type: "concurrency", Adaptive: e.adaptive, Limit: e.limit.Load(), InFlight: g.inFlight.Load(),
		Waiting: g.waiting.Load(), Admitted: g.admitted.Load(), Waited: g.waited.Load(), Refused: g.refused.Load(),
		MaxWait: g.maxWait.String(), Status: g.refusal.Status,
		rtt: time.Duration(e.rttNow.Load()), rttZero: time.Duration(e.rttZero.Load())}
	st.RTT = ms(st.rtt)
	if e.adaptive {
		st.Min, st.Max = int(e.min), int(e.max)
		st.RTTZero = ms(st.rttZero)
		st.Probing = e.phase.Load() == phaseProbing
		st.Probes = e.probes.Load()
	}
	return st
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Statuses lists every gate's status, services' first.
func (gs *Gates) Statuses() []Status {
	out := make([]Status, 0, len(gs.list))
	for _, e := range gs.list {
		st := e.gate.Status()
		st.Scope, st.Name = e.scope, e.name
		out = append(out, st)
	}
	return out
}

// Inspect implements pipeline.Inspector: each gate under "limits" (GET
// /admin/limits) and under "concurrency" (the dashboard).
func (gs *Gates) Inspect(show func(kind string, state any)) {
	for _, st := range gs.Statuses() {
		show("limits", st)
		show("concurrency", st)
	}
}

var (
	_ pipeline.Reporter  = (*Gates)(nil)
	_ pipeline.Inspector = (*Gates)(nil)
)
