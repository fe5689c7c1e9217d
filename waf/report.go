package waf

import "github.com/tollgate/tollgate/pipeline"

var (
	detections = &pipeline.Family{Name: "tollgate_waf_detections_total", Type: pipeline.Counter,
		Help: "Requests in which the route's WAF found an attack, by kind (blocked or only logged).", Labels: []string{"kind"}}
	blocked = &pipeline.Family{Name: "tollgate_waf_blocked_total", Type: pipeline.Counter,
		Help: "Requests the route's WAF refused (403 for an attack; 400, 413 or 415 for a body it could not read whole)."}
	hidden = &pipeline.Family{Name: "tollgate_waf_uninspected_bodies_total", Type: pipeline.Counter,
		Help: "Bodies the route's WAF could not read whole (refused at block, logged at log), by reason.", Labels: []string{"reason"}}
)

// Report implements pipeline.Reporter.
func (w *WAF) Report(emit pipeline.Emit) {
	emit(detections, float64(w.counts.SQLi.Load()), "sqli")
	emit(detections, float64(w.counts.XSS.Load()), "xss")
	emit(blocked, float64(w.counts.Blocked.Load()))
	for i, name := range ReasonNames {
		emit(hidden, float64(w.counts.Unread[i].Load()), name)
	}
}
