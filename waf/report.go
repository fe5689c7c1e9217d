package waf

import "github.com/tollgate/tollgate/pipeline"

var (
	detections = &pipeline.Family{Name: "tollgate_waf_detections_total", Type: pipeline.Counter,
		Help: "Requests in which the route's WAF found an attack, by kind (blocked or only logged).", Labels: []string{"kind"}}
	blocked = &pipeline.Family{Name: "tollgate_waf_blocked_total", Type: pipeline.Counter,
		Help: "Requests the route's WAF refused with 403."}
)

// Report implements pipeline.Reporter.
func (w *WAF) Report(emit pipeline.Emit) {
	emit(detections, float64(w.counts.SQLi.Load()), "sqli")
	emit(detections, float64(w.counts.XSS.Load()), "xss")
	emit(blocked, float64(w.counts.Blocked.Load()))
}
