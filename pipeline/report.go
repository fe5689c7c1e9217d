package pipeline

// Features report their figures to /metrics the same way: a filter (or a
// shared object a feature keeps in the Env under a Key) that counts
// something keeps its own atomic counters on the request path and
// implements Reporter; the metrics writer finds it in the live snapshot
// and calls Report when Prometheus scrapes, never on the request path. A
// feature needs no metrics library and costs nothing per request beyond
// its own counters.
//
//	var refusals = &pipeline.Family{Name: "tollgate_limit_refusals_total",
//		Help: "Requests refused by a limit rule.", Type: pipeline.Counter,
//		Labels: []string{"rule", "code"}}
//
//	func (f *Filter) Report(emit pipeline.Emit) {
//		for _, r := range f.rules {
//			emit(refusals, float64(r.refused.Load()), r.name, r.code)
//		}
//	}
//
// The writer adds a "route" label (the route's name) before a route
// filter's labels; a global filter's or a shared object's figures carry only
// their own labels. One family keeps one label set: a figure whose label
// count does not match its family is dropped.

// MetricType is a family's Prometheus type.
type MetricType uint8

// Metric types a feature may report.
const (
	Counter MetricType = iota // only goes up (resets with the process)
	Gauge                     // goes up and down
)

// Family describes one metric family. Declare it once, as a package
// variable: the writer groups figures by the pointer.
type Family struct {
	Name   string // tollgate_…, with _total for counters
	Help   string
	Type   MetricType
	Labels []string // label names, after "route" for route filters
}

// Emit hands one figure to the metrics writer: labels are the values of
// f.Labels, in order.
type Emit func(f *Family, value float64, labels ...string)

// Reporter is implemented by filters and shared feature objects that have
// figures for /metrics. Report runs at scrape time on the scraper's
// goroutine, concurrently with requests: read counters atomically.
type Reporter interface {
	Report(emit Emit)
}
