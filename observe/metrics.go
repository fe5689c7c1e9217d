package observe

import (
	"bytes"
	"io"
	"maps"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/internal/stripe"
	"github.com/tollgate/tollgate/pipeline"
)

func init() { vm.ExposeMetadata(true) } // TYPE lines for the set's families

// Metrics are the gateway's Prometheus figures. Per-request series (by
// route, by service, by decision) are resolved when a configuration is
// loaded (SetRoutes), so Observe is a map read, a few atomic adds and no
// lock; figures that only need reading when Prometheus asks (connections,
// breakers, instances, Redis, features' own counters) come from sources
// called at scrape time.
//
// A request counts in its loop's stripe of each series (internal/stripe),
// so loops never write the same cache line. When Prometheus asks, the
// stripes' sums are set into VictoriaMetrics/metrics counters in one set
// (they expose themselves, settle); latency histograms are Histogram
// (lock-free, striped too) written with the same buckets for every series.
type Metrics struct {
	set *vm.Set

	table     atomic.Pointer[seriesTable]
	decisions atomic.Pointer[map[decisionKey]*decisionSeries]
	mu        sync.Mutex // builds tables and late series; never on a hot request path

	sourcesMu sync.Mutex
	sources   []func(*Scrape)

	reloadOK, reloadRefused *vm.Counter
	lastReload              atomic.Pointer[ReloadResult]
	started                 time.Time
}

// Label values for requests that matched no route.
const noRoute = "(none)"

// maxDecisions bounds the decision series; later ones count as "(other)".
const maxDecisions = 1000

type seriesTable struct {
	routes   map[string]*RouteSeries
	services map[string]*ServiceSeries
}

// RouteSeries are the per-route series. Requests count in cells, one per
// loop stripe; the exposed counters are set to their sums when
// Prometheus asks (settle).
type RouteSeries struct {
	Name  string
	label string // the route label, escaped
	// requests by status class (index = status/100, 0 for odd codes):
	// 2xx…5xx from the start, 1xx and odd codes once counted. Guarded by
	// Metrics.mu.
	requests [6]*vm.Counter
	bytesIn  *vm.Counter
	bytesOut *vm.Counter
	Latency  Histogram
	_        stripe.Pad
	cells    [stripe.N]routeCell
}

// routeCell is one stripe's share of a route's counts.
type routeCell struct {
	byClass  [6]atomic.Uint64
	bytesIn  atomic.Uint64
	bytesOut atomic.Uint64
	_        stripe.Pad
}

// ServiceSeries are the per-service series of upstream exchanges, counted
// in stripes as routes are.
type ServiceSeries struct {
	Name    string
	label   string
	results [len(resultLabels)]*vm.Counter
	Latency Histogram
	_       stripe.Pad
	cells   [stripe.N]serviceCell
}

type serviceCell struct {
	results [len(resultLabels)]atomic.Uint64
	_       stripe.Pad
}

type decisionKey struct {
	decision string
	status   int
}

// decisionSeries counts one decision and status in stripes, as routes
// are: a flood of refusals (a tenant over its limit, a scanner's 404s) is
// when the gateway must be cheapest, and a shared counter would move its
// line between the loops' cores at each one.
type decisionSeries struct {
	// The exposed counters, set at scrape (settle). Several series may
	// share one: every decision past maxDecisions counts as "(other)",
	// and a parse error kind's counter is its decision's at every status.
	count *vm.Counter
	parse *vm.Counter // also a parse error of this kind, or nil
	_     stripe.Pad
	cells [stripe.N]decisionCell
}

type decisionCell struct {
	n atomic.Uint64
	_ stripe.Pad
}

func (d *decisionSeries) total() (n uint64) {
	for i := range d.cells {
		n += d.cells[i].n.Load()
	}
	return n
}

var classLabels = [6]string{"other", "1xx", "2xx", "3xx", "4xx", "5xx"}

// resultLabels are pipeline.Result names, "none" for the zero result.
var resultLabels = [...]string{"none", "ok", "timeout", "refused", "reset", "busy", "too_large", "client_body", "no_instance", "breaker_open"}

// parseKinds maps the message of each codec error (what a parse refusal
// leaves in Ctx.Decision) to a short kind for tollgate_parse_errors_total.
var parseKinds = func() map[string]string {
	m := map[string]string{"malformed request": "malformed"}
	for _, err := range codec.Errors {
		msg := codec.Message(err)
		kind := strings.TrimPrefix(err.Error(), "codec: ")
		m[msg] = kind
	}
	return m
}()

// NewMetrics returns empty metrics; SetRoutes fills the series of a
// configuration.
func NewMetrics() *Metrics {
	m := &Metrics{set: vm.NewSet(), started: time.Now()}
	m.table.Store(&seriesTable{routes: map[string]*RouteSeries{}, services: map[string]*ServiceSeries{}})
	m.decisions.Store(&map[decisionKey]*decisionSeries{})
	m.reloadOK = m.set.NewCounter(`tollgate_config_reloads_total{result="ok"}`)
	m.reloadRefused = m.set.NewCounter(`tollgate_config_reloads_total{result="refused"}`)
	return m
}

// Set is the metrics set the gateway's counters live in. Code outside the
// request path that keeps its own counters can create them here
// (GetOrCreateCounter with a full name and labels) and they are exposed
// with the rest; features should implement pipeline.Reporter instead.
func (m *Metrics) Set() *vm.Set { return m.set }

// AddSource registers f to add scrape-time figures to every scrape.
func (m *Metrics) AddSource(f func(*Scrape)) {
	m.sourcesMu.Lock()
	m.sources = append(m.sources, f)
	m.sourcesMu.Unlock()
}

// SetRoutes makes routes and services the series requests are counted in:
// existing series of the same names carry on, the series of routes and
// services no longer named are removed. Call it with a new configuration
// before it goes live; a request of an older configuration that finishes
// afterwards still counts (its series is made again, and goes with the
// next SetRoutes).
func (m *Metrics) SetRoutes(routes, services []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.table.Load()
	next := &seriesTable{routes: make(map[string]*RouteSeries, len(routes)+1), services: make(map[string]*ServiceSeries, len(services))}
	for _, name := range append(append([]string(nil), routes...), "") {
		if r := old.routes[name]; r != nil {
			next.routes[name] = r
		} else {
			next.routes[name] = m.newRoute(name)
		}
	}
	for _, name := range services {
		if s := old.services[name]; s != nil {
			next.services[name] = s
		} else {
			next.services[name] = m.newService(name)
		}
	}
	for name, r := range old.routes {
		if next.routes[name] == nil {
			m.dropRoute(r)
		}
	}
	for name, s := range old.services {
		if next.services[name] == nil {
			m.dropService(s)
		}
	}
	m.table.Store(next)
}

func (m *Metrics) newRoute(name string) *RouteSeries {
	label := name
	if label == "" {
		label = noRoute
	}
	r := &RouteSeries{Name: name, label: LabelValue(label)}
	for i := 2; i < len(classLabels); i++ { // 1xx and odd codes get theirs when first seen
		r.requests[i] = m.requestCounter(r, i)
	}
	r.bytesIn = m.set.GetOrCreateCounter(`tollgate_request_bytes_total{route="` + r.label + `"}`)
	r.bytesOut = m.set.GetOrCreateCounter(`tollgate_response_bytes_total{route="` + r.label + `"}`)
	return r
}

func (m *Metrics) requestCounter(r *RouteSeries, cls int) *vm.Counter {
	return m.set.GetOrCreateCounter(`tollgate_requests_total{route="` + r.label + `",class="` + classLabels[cls] + `"}`)
}

// routeCounts are a route's counts summed over its stripes.
type routeCounts struct {
	byClass           [6]uint64
	bytesIn, bytesOut uint64
}

func (r *RouteSeries) counts() routeCounts {
	var n routeCounts
	for i := range r.cells {
		c := &r.cells[i]
		for j := range c.byClass {
			n.byClass[j] += c.byClass[j].Load()
		}
		n.bytesIn += c.bytesIn.Load()
		n.bytesOut += c.bytesOut.Load()
	}
	return n
}

func (s *ServiceSeries) counts() (n [len(resultLabels)]uint64) {
	for i := range s.cells {
		for j := range s.cells[i].results {
			n[j] += s.cells[i].results[j].Load()
		}
	}
	return n
}

// settle sets the exposed counters of every route, service and decision
// to the sums of their stripes, making the series of 1xx and odd codes
// once counted.
// Under mu, as SetRoutes: a route a reload dropped gets no series again,
// and two scrapes never set a counter back to an older sum.
func (m *Metrics) settle() {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.table.Load()
	for _, r := range t.routes {
		n := r.counts()
		for cls, v := range n.byClass {
			c := r.requests[cls]
			if c == nil {
				if v == 0 {
					continue
				}
				c = m.requestCounter(r, cls)
				r.requests[cls] = c
			}
			c.Set(v)
		}
		r.bytesIn.Set(n.bytesIn)
		r.bytesOut.Set(n.bytesOut)
	}
	for _, s := range t.services {
		for i, v := range s.counts() {
			if c := s.results[i]; c != nil {
				c.Set(v)
			}
		}
	}
	sums := map[*vm.Counter]uint64{}
	for _, d := range *m.decisions.Load() {
		n := d.total()
		sums[d.count] += n
		if d.parse != nil {
			sums[d.parse] += n
		}
	}
	for c, n := range sums {
		c.Set(n)
	}
}

func (m *Metrics) dropRoute(r *RouteSeries) {
	for _, cls := range classLabels {
		m.set.UnregisterMetric(`tollgate_requests_total{route="` + r.label + `",class="` + cls + `"}`)
	}
	m.set.UnregisterMetric(`tollgate_request_bytes_total{route="` + r.label + `"}`)
	m.set.UnregisterMetric(`tollgate_response_bytes_total{route="` + r.label + `"}`)
}

func (m *Metrics) newService(name string) *ServiceSeries {
	s := &ServiceSeries{Name: name, label: LabelValue(name)}
	for i, res := range resultLabels {
		if i == 0 {
			continue
		}
		s.results[i] = m.set.GetOrCreateCounter(`tollgate_upstream_requests_total{service="` + s.label + `",result="` + res + `"}`)
	}
	return s
}

func (m *Metrics) dropService(s *ServiceSeries) {
	for i, res := range resultLabels {
		if i > 0 {
			m.set.UnregisterMetric(`tollgate_upstream_requests_total{service="` + s.label + `",result="` + res + `"}`)
		}
	}
}

// Observe implements pipeline.Observer: it counts one finished request.
// It takes no lock and allocates nothing once the request's route,
// service and decision have series (from SetRoutes or an earlier request).
func (m *Metrics) Observe(c *pipeline.Ctx, end time.Time) {
	t := m.table.Load()
	r := t.routes[c.RouteName]
	if r == nil {
		r = m.lateRoute(c.RouteName)
	}
	status := c.Resp.StatusCode()
	st := c.Stripe()
	rc := &r.cells[st]
	rc.byClass[statusClass(status)].Add(1)
	r.Latency.Observe(st, end.Sub(c.Start))
	rc.bytesIn.Add(uint64(max(c.BytesIn, 0)))
	rc.bytesOut.Add(uint64(codec.BodyLen(c.Resp)))
	if o := &c.Outcome; o.Service != "" && o.Result != pipeline.ResultNone && int(o.Result) < len(resultLabels) {
		s := t.services[o.Service]
		if s == nil {
			s = m.lateService(o.Service)
		}
		s.cells[st].results[o.Result].Add(1)
		if o.Attempts > 0 {
			s.Latency.Observe(st, o.Latency)
		}
	}
	if c.Decision != "" {
		d := (*m.decisions.Load())[decisionKey{c.Decision, status}]
		if d == nil {
			d = m.lateDecision(c.Decision, status, c.RouteName == "")
		}
		d.cells[st].n.Add(1)
	}
}

func (m *Metrics) lateRoute(name string) *RouteSeries {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.table.Load()
	if r := old.routes[name]; r != nil {
		return r
	}
	next := &seriesTable{routes: maps.Clone(old.routes), services: old.services}
	r := m.newRoute(name)
	next.routes[name] = r
	m.table.Store(next)
	return r
}

func (m *Metrics) lateService(name string) *ServiceSeries {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.table.Load()
	if s := old.services[name]; s != nil {
		return s
	}
	next := &seriesTable{routes: old.routes, services: maps.Clone(old.services)}
	s := m.newService(name)
	next.services[name] = s
	m.table.Store(next)
	return s
}

// lateDecision makes the series of a decision seen for the first time.
// Decisions are the canned messages and words of the configuration's
// filters, a bounded set; past maxDecisions they are counted together.
func (m *Metrics) lateDecision(decision string, status int, unrouted bool) *decisionSeries {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.decisions.Load()
	key := decisionKey{decision, status}
	if d := old[key]; d != nil {
		return d
	}
	label := decision
	if len(old) >= maxDecisions {
		label = "(other)"
	}
	d := &decisionSeries{count: m.set.GetOrCreateCounter(`tollgate_decisions_total{decision="` +
		LabelValue(label) + `",code="` + strconv.Itoa(status) + `"}`)}
	if kind, ok := parseKinds[decision]; ok && unrouted {
		d.parse = m.set.GetOrCreateCounter(`tollgate_parse_errors_total{kind="` + LabelValue(kind) + `"}`)
	}
	next := make(map[decisionKey]*decisionSeries, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[key] = d
	m.decisions.Store(&next)
	return d
}

// ReloadResult is the outcome of the last configuration load.
type ReloadResult struct {
	At      time.Time `json:"at"`
	OK      bool      `json:"ok"`
	Reason  string    `json:"reason"`  // SIGHUP, admin API, file changed, start
	Version uint64    `json:"version"` // the version running afterwards
	Error   string    `json:"error,omitempty"`
}

// Reloaded records a configuration load's outcome.
func (m *Metrics) Reloaded(r ReloadResult) {
	if r.OK {
		m.reloadOK.Inc()
	} else {
		m.reloadRefused.Inc()
	}
	m.lastReload.Store(&r)
}

// Settled records that the configuration's source is back to what runs
// (a refused edit undone): the last load's failure no longer stands, so
// the alert on it clears. No load happened, and none is counted.
func (m *Metrics) Settled(reason string, version uint64) {
	if last := m.lastReload.Load(); last == nil || last.OK {
		return
	}
	m.lastReload.Store(&ReloadResult{At: time.Now(), OK: true, Reason: reason, Version: version})
}

// LastReload returns the last load's outcome (nil before any).
func (m *Metrics) LastReload() *ReloadResult { return m.lastReload.Load() }

// RouteFigures are one route's running totals, for the dashboard.
type RouteFigures struct {
	Name    string
	ByClass [6]uint64
	Latency HistogramSnapshot
}

// ReadRoutes returns the running totals of every route with series,
// sorted by name.
func (m *Metrics) ReadRoutes() []RouteFigures {
	t := m.table.Load()
	out := make([]RouteFigures, 0, len(t.routes))
	for _, r := range t.routes {
		out = append(out, RouteFigures{Name: r.Name, ByClass: r.counts().byClass, Latency: r.Latency.Read()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ServiceFigures are one service's upstream latency totals.
type ServiceFigures struct {
	Name     string
	Latency  HistogramSnapshot
	Failures uint64 // exchanges that failed (timeout, refused, reset, busy, no instance)
}

// ReadServices returns the upstream figures of every service, sorted.
func (m *Metrics) ReadServices() []ServiceFigures {
	t := m.table.Load()
	out := make([]ServiceFigures, 0, len(t.services))
	for _, s := range t.services {
		f := ServiceFigures{Name: s.Name, Latency: s.Latency.Read()}
		for i, n := range s.counts() {
			if pipeline.Result(i).UpstreamFailure() {
				f.Failures += n
			}
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// DecisionFigures is one decision's running total.
type DecisionFigures struct {
	Decision string `json:"decision"`
	Code     int    `json:"code"`
	Count    uint64 `json:"count"`
}

// ReadDecisions returns the running total of every decision seen.
func (m *Metrics) ReadDecisions() []DecisionFigures {
	ds := *m.decisions.Load()
	out := make([]DecisionFigures, 0, len(ds))
	for k, d := range ds {
		out = append(out, DecisionFigures{Decision: k.decision, Code: k.status, Count: d.total()})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Decision != out[j].Decision {
			return out[i].Decision < out[j].Decision
		}
		return out[i].Code < out[j].Code
	})
	return out
}

const (
	helpRequestDuration  = "Time from the end of the request's headers to the answer being built, by route."
	helpUpstreamDuration = "Time of the upstream exchange (retry included), by service."
)

// WritePrometheus writes every figure in the Prometheus text format: the
// counters, the latency histograms, the scrape-time sources, then the Go
// runtime and process figures.
func (m *Metrics) WritePrometheus(w io.Writer) {
	m.settle()
	var set, buf bytes.Buffer
	m.set.WritePrometheus(&set)
	withHelp(&buf, set.Bytes())
	t := m.table.Load()
	routes := make([]*RouteSeries, 0, len(t.routes))
	for _, r := range t.routes {
		routes = append(routes, r)
	}
	sort.Slice(routes, func(i, j int) bool { return routes[i].label < routes[j].label })
	writeHistogramFamily(&buf, "tollgate_request_duration_seconds", helpRequestDuration, "route", len(routes),
		func(i int) (string, *Histogram) { return routes[i].label, &routes[i].Latency })
	services := make([]*ServiceSeries, 0, len(t.services))
	for _, s := range t.services {
		services = append(services, s)
	}
	sort.Slice(services, func(i, j int) bool { return services[i].label < services[j].label })
	writeHistogramFamily(&buf, "tollgate_upstream_duration_seconds", helpUpstreamDuration, "service", len(services),
		func(i int) (string, *Histogram) { return services[i].label, &services[i].Latency })

	var s Scrape
	s.Gauge("tollgate_start_time_seconds", "When the process started (Unix time).", float64(m.started.UnixNano())/1e9)
	if r := m.LastReload(); r != nil {
		ok := 0.0
		if r.OK {
			ok = 1
		}
		s.Gauge("tollgate_config_last_reload_successful", "Whether the last configuration load was applied (1) or refused (0).", ok)
		s.Gauge("tollgate_config_last_reload_timestamp_seconds", "When the configuration was last loaded or refused (Unix time).", float64(r.At.UnixNano())/1e9)
	}
	m.sourcesMu.Lock()
	sources := append([]func(*Scrape){}, m.sources...)
	m.sourcesMu.Unlock()
	for _, f := range sources {
		f(&s)
	}
	_, _ = s.WriteTo(&buf)
	vm.WriteProcessMetrics(&buf)
	_, _ = w.Write(buf.Bytes())
}

// boundLabels are LatencyBounds in seconds, as le label values.
var boundLabels = func() []string {
	out := make([]string, len(LatencyBounds))
	for i, b := range LatencyBounds {
		out[i] = strconv.FormatFloat(b.Seconds(), 'g', -1, 64)
	}
	return out
}()

func writeHistogramFamily(buf *bytes.Buffer, name, help, label string, n int, series func(int) (string, *Histogram)) {
	if n == 0 {
		return
	}
	buf.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n")
	b := buf.AvailableBuffer()
	for i := range n {
		value, h := series(i)
		snap := h.Read()
		var cum uint64
		for j, c := range snap.Counts {
			cum += c
			le := "+Inf"
			if j < len(boundLabels) {
				le = boundLabels[j]
			}
			b = append(b, name...)
			b = append(b, "_bucket{"...)
			b = append(b, label...)
			b = append(b, `="`...)
			b = append(b, value...)
			b = append(b, `",le="`...)
			b = append(b, le...)
			b = append(b, `"} `...)
			b = strconv.AppendUint(b, cum, 10)
			b = append(b, '\n')
		}
		for _, part := range [2]string{"_sum", "_count"} {
			b = append(b, name...)
			b = append(b, part...)
			b = append(b, '{')
			b = append(b, label...)
			b = append(b, `="`...)
			b = append(b, value...)
			b = append(b, `"} `...)
			if part == "_sum" {
				b = strconv.AppendFloat(b, snap.Sum.Seconds(), 'g', -1, 64)
			} else {
				b = strconv.AppendUint(b, cum, 10)
			}
			b = append(b, '\n')
		}
	}
	buf.Write(b)
}

// counterHelp are the HELP texts of the set's families (the set writes
// empty ones).
var counterHelp = map[string]string{
	"tollgate_requests_total":          "Requests answered, by route and status class (route (none): no route matched or refused before routing).",
	"tollgate_request_bytes_total":     "Bytes of requests as clients sent them (header section and declared body), by route.",
	"tollgate_response_bytes_total":    "Bytes of response bodies sent to clients, by route.",
	"tollgate_upstream_requests_total": "Upstream exchanges by service and how they ended (ok, timeout, refused, reset, busy, too_large, client_body, no_instance, breaker_open).",
	"tollgate_decisions_total":         "Requests the gateway answered or marked itself, by the access log's decision (auth refusals, limits, WAF, breaker, degrade, mock, no route, parse errors) and status.",
	"tollgate_parse_errors_total":      "Requests refused before routing because they could not be parsed or broke a client limit, by kind.",
	"tollgate_config_reloads_total":    "Configuration loads after the start, applied (ok) or refused (the running configuration stayed).",
}

// withHelp copies exposition text to dst, filling empty HELP lines from
// counterHelp.
func withHelp(dst *bytes.Buffer, src []byte) {
	for len(src) > 0 {
		line := src
		if i := bytes.IndexByte(src, '\n'); i >= 0 {
			line, src = src[:i+1], src[i+1:]
		} else {
			src = nil
		}
		if name, ok := bytes.CutPrefix(line, []byte("# HELP ")); ok {
			name = bytes.TrimRight(name, "\n")
			if bytes.IndexByte(name, ' ') < 0 {
				if h := counterHelp[string(name)]; h != "" {
					dst.WriteString("# HELP " + string(name) + " " + escapeHelp(h) + "\n")
					continue
				}
			}
		}
		dst.Write(line)
	}
}
