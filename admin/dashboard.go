package admin

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate/tollgate/anomaly"
	"github.com/tollgate/tollgate/breaker"
	"github.com/tollgate/tollgate/cluster"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/observe"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/upstream"
)

// The live dashboard: one page embedded in the binary (no CDN: edge hosts
// are often offline) that polls GET /admin/live once a second while it is
// visible. The figures are computed only when asked: with nobody watching,
// the dashboard costs nothing. Rates are the differences between two reads
// of the counters the metrics keep anyway; viewers polling within half a
// second of each other share one computation. The cluster's figures are
// the other nodes' reports, which their heartbeats write to Redis anyway:
// one read a computation, none without a viewer.

//go:embed dashboard.html
var dashboardPage []byte

// liveMinInterval is the shortest time between two computations; a poll
// sooner gets the last answer again.
const liveMinInterval = 500 * time.Millisecond

type dashboardCache struct {
	mu      sync.Mutex
	at      time.Time // when body was computed
	body    []byte
	prevAt  time.Time
	routes  map[string]observe.RouteFigures
	svcs    map[string]observe.ServiceFigures
	decided map[string]uint64
}

// dashboardFirst marks where the page carries its first figures, so that
// it is filled the moment it loads rather than after its first poll.
var dashboardFirst = []byte(`<script id="first" type="application/json">null</script>`)

func (s *Server) dashboard(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	before, after, _ := bytes.Cut(dashboardPage, dashboardFirst)
	_, _ = w.Write(before)
	// json.Marshal escapes <, > and & (and U+2028/9), so the figures
	// cannot end the script element they are carried in.
	_, _ = w.Write(dashboardFirst[:len(dashboardFirst)-len("null</script>")])
	_, _ = w.Write(s.liveBody(time.Now()))
	_, _ = w.Write([]byte("</script>"))
	_, _ = w.Write(after)
}

func (s *Server) live(w http.ResponseWriter, _ *http.Request) {
	body := s.liveBody(time.Now())
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}

// Live view types: short JSON keys, since a page with 1,000 routes reads
// this every second.
type liveRoute struct {
	Name    string  `json:"name"`
	QPS     float64 `json:"qps"`
	P50     float64 `json:"p50"` // milliseconds
	P95     float64 `json:"p95"`
	P99     float64 `json:"p99"`
	P999    float64 `json:"p999"`
	R4xx    float64 `json:"r4xx"` // per second
	R5xx    float64 `json:"r5xx"`
	Total   uint64  `json:"total"`
	Breaker string  `json:"breaker,omitempty"`
	// Builtin marks the rows of requests no configured route took: no
	// route matched, the default or the fallback answer.
	Builtin bool `json:"builtin,omitempty"`
}

type liveService struct {
	Name     string  `json:"name"`
	RPS      float64 `json:"rps"`
	P50      float64 `json:"p50"`
	P99      float64 `json:"p99"`
	Failures float64 `json:"failures"` // per second
	Breaker  string  `json:"breaker,omitempty"`
}

type liveDecision struct {
	Decision string  `json:"decision"`
	Code     int     `json:"code"`
	Rate     float64 `json:"rate"`
	Total    uint64  `json:"total"`
}

type liveBreaker struct {
	Scope       string  `json:"scope"`
	Name        string  `json:"name"`
	State       string  `json:"state"`
	Trips       uint64  `json:"trips"`
	FailureRate float64 `json:"failure_rate"`
}

type liveInstance struct {
	Service string `json:"service"`
	upstream.InstanceStatus
	// SetChanged is when a discovered service's set last changed.
	SetChanged string `json:"set_changed,omitempty"`
}

type liveTotals struct {
	QPS  float64 `json:"qps"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	R2xx float64 `json:"r2xx"`
	R4xx float64 `json:"r4xx"`
	R5xx float64 `json:"r5xx"`
	// Requests is every request counted since the start.
	Requests uint64 `json:"requests"`
}

// liveCluster is the whole cluster's traffic: this node's live figures
// plus what every other live node reported with its last heartbeat (at
// most a few seconds old).
type liveCluster struct {
	cluster.Load            // the sum over Nodes
	Nodes        []liveNode `json:"nodes"`
	// Source is "redis" when the other nodes' reports were read, "node"
	// when the figures are this node's alone: standalone, a fixed node
	// count (no membership), or Redis unavailable (Error says why).
	Source string `json:"source"`
	Error  string `json:"error,omitempty"`
}

type liveNode struct {
	Node string `json:"node"`
	cluster.Load
	AgeMS int64 `json:"age_ms"` // how old the report is (0 for this node)
	Self  bool  `json:"self,omitempty"`
}

// clusterFigures adds to this node's figures (self) those the other live
// nodes reported. A report of this node stands in for its live figures
// until the dashboard has two reads of its own to compute them.
func (s *Server) clusterFigures(now time.Time, self liveNode, live bool) liveCluster {
	out := liveCluster{Source: "node"}
	var others []liveNode
	if f := s.deps.Ops.NodeLoads; f != nil {
		loads, err := f(context.Background())
		if err != nil {
			out.Error = err.Error()
		} else {
			out.Source = "redis"
		}
		for _, l := range loads {
			if l.Node == self.Node {
				if !live {
					self.Load = l.Load
				}
				continue
			}
			others = append(others, liveNode{Node: l.Node, Load: l.Load, AgeMS: max(now.Sub(l.At).Milliseconds(), 0)})
		}
	}
	out.Nodes = append([]liveNode{self}, others...)
	for _, n := range out.Nodes {
		out.QPS += n.QPS
		out.R4xx += n.R4xx
		out.R5xx += n.R5xx
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// liveBody computes the dashboard's figures (or returns the last ones
// when they are fresh enough).
func (s *Server) liveBody(now time.Time) []byte {
	c := &s.ops.dash
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.body != nil && now.Sub(c.at) < liveMinInterval {
		return c.body
	}
	snap := s.deps.Snapshot()
	out := map[string]any{"time": now.UTC().Format(time.RFC3339Nano)}
	var interval float64
	if !c.prevAt.IsZero() {
		interval = now.Sub(c.prevAt).Seconds()
	}
	out["interval"] = interval

	h := healthFigures(snap)
	out["breakers"] = h.breakers
	out["instances"] = h.instances
	out["concurrency"] = concurrencyGates(snap)
	t := liveTraffic{routes: []liveRoute{}, services: []liveService{}, decisions: []liveDecision{}}
	if m := s.deps.Ops.Metrics; m != nil {
		t = c.trafficFigures(m, snap, interval, &h)
		if r := m.LastReload(); r != nil {
			out["last_reload"] = r
		}
	}
	out["totals"] = t.totals
	var nodeID string
	if snap != nil {
		nodeID = snap.File.NodeID
	}
	self := liveNode{Node: nodeID, Self: true, Load: cluster.Load{QPS: t.totals.QPS, R4xx: t.totals.R4xx, R5xx: t.totals.R5xx}}
	out["cluster_load"] = s.clusterFigures(now, self, interval > 0 && s.deps.Ops.Metrics != nil)
	out["routes"] = t.routes
	out["services"] = t.services
	out["decisions"] = t.decisions

	if snap != nil {
		out["config"] = map[string]any{"version": snap.Version, "source": snap.Source,
			"loaded": snap.Loaded.UTC().Format(time.RFC3339), "node_id": snap.File.NodeID, "routes": len(snap.Routes)}
	}
	out["cluster"] = s.redisFigures()
	alerts := []anomaly.Alert{}
	if e := s.deps.Ops.Alerts; e != nil {
		alerts = append(alerts, e.Figures().Active...)
	}
	out["alerts"] = alerts
	if f := s.deps.Ops.Ready; f != nil {
		ok, why := f()
		out["ready"] = map[string]any{"ok": ok, "why": why}
	}
	if s.deps.Stats != nil {
		out["node"] = s.deps.Stats()
	}
	body, err := json.Marshal(out)
	if err != nil {
		body = []byte(`{"error":"encoding the dashboard failed"}`)
	}
	c.body, c.at, c.prevAt = body, now, now
	return body
}

// concurrencyGates lists the concurrency gates of snap (package
// adaptive's statuses) for their table.
func concurrencyGates(snap *config.Snapshot) []any {
	out := []any{}
	if snap == nil {
		return out
	}
	snap.Inspectors(func(_ string, in pipeline.Inspector) {
		in.Inspect(func(kind string, state any) {
			if kind == "concurrency" {
				out = append(out, state)
			}
		})
	})
	return out
}

// liveHealth is the breakers and instances of the running snapshot, and
// each route's and service's breaker state for their rows.
type liveHealth struct {
	breakers     []liveBreaker
	instances    []liveInstance
	routeBreaker map[string]string
	svcBreaker   map[string]string
}

// healthFigures reads the breakers by route and service, and every
// instance; not-closed breakers and instances that are out come first.
func healthFigures(snap *config.Snapshot) liveHealth {
	h := liveHealth{breakers: []liveBreaker{}, instances: []liveInstance{},
		routeBreaker: map[string]string{}, svcBreaker: map[string]string{}}
	addBreaker := func(scope, name string, b *breaker.Breaker) string {
		st := b.Status()
		h.breakers = append(h.breakers, liveBreaker{Scope: scope, Name: name, State: st.State, Trips: st.Trips, FailureRate: st.FailureRate})
		return st.State
	}
	if snap != nil {
		for _, r := range snap.Routes {
			if r.Chain == nil {
				continue
			}
			for _, f := range r.Chain.Filters() {
				if g, ok := f.(guard); ok {
					h.routeBreaker[r.Name] = addBreaker("route", r.Name, g.Breaker())
				}
			}
		}
		names := make([]string, 0, len(upstream.ServicesOf(snap.Env())))
		for name := range upstream.ServicesOf(snap.Env()) {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			svc := upstream.ServicesOf(snap.Env())[name]
			if b := svc.Breaker(); b != nil {
				h.svcBreaker[name] = addBreaker("service", name, b)
			}
			changed := ""
			if m := svc.Members(); m != nil {
				changed = m.Watch().Status().Changed.UTC().Format(time.TimeOnly)
			}
			for _, in := range svc.Instances() {
				h.instances = append(h.instances, liveInstance{Service: name, InstanceStatus: in.Status(), SetChanged: changed})
			}
		}
	}
	sort.SliceStable(h.breakers, func(i, j int) bool { return h.breakers[i].State != "closed" && h.breakers[j].State == "closed" })
	sort.SliceStable(h.instances, func(i, j int) bool { return h.instances[i].State != "up" && h.instances[j].State == "up" })
	return h
}

// liveTraffic is what the metrics say since the last read.
type liveTraffic struct {
	totals    liveTotals
	routes    []liveRoute
	services  []liveService
	decisions []liveDecision
}

// trafficFigures computes rates and latencies from the metrics against
// the last read (interval seconds ago, 0 for the first), and keeps this
// read for the next. The caller holds c.mu.
func (c *dashboardCache) trafficFigures(m *observe.Metrics, snap *config.Snapshot, interval float64, h *liveHealth) liveTraffic {
	t := liveTraffic{routes: []liveRoute{}, services: []liveService{}, decisions: []liveDecision{}}
	rate := func(cur, prev uint64) float64 {
		if interval <= 0 || cur < prev {
			return 0
		}
		return float64(cur-prev) / interval
	}
	var all, allPrev observe.HistogramSnapshot
	curRoutes := map[string]observe.RouteFigures{}
	for _, f := range m.ReadRoutes() {
		curRoutes[f.Name] = f
		p := c.routes[f.Name]
		d := f.Latency.Sub(&p.Latency)
		var total, prevTotal uint64
		for i := range f.ByClass {
			total += f.ByClass[i]
			prevTotal += p.ByClass[i]
		}
		for i := range all.Counts {
			all.Counts[i] += f.Latency.Counts[i]
			allPrev.Counts[i] += p.Latency.Counts[i]
		}
		t.totals.Requests += total
		t.totals.R2xx += rate(f.ByClass[2], p.ByClass[2])
		t.totals.R4xx += rate(f.ByClass[4], p.ByClass[4])
		t.totals.R5xx += rate(f.ByClass[5], p.ByClass[5])
		t.totals.QPS += rate(total, prevTotal)
		name := f.Name
		if name == "" {
			name = "(none)"
		}
		if snap != nil && f.Name != "" && f.Name[0] == '(' && total == 0 {
			continue // (default), (fallback): shown once they serve
		}
		t.routes = append(t.routes, liveRoute{
			Name: name, QPS: rate(total, prevTotal), Total: total,
			P50: ms(d.Quantile(0.5)), P95: ms(d.Quantile(0.95)), P99: ms(d.Quantile(0.99)), P999: ms(d.Quantile(0.999)),
			R4xx: rate(f.ByClass[4], p.ByClass[4]), R5xx: rate(f.ByClass[5], p.ByClass[5]),
			Breaker: h.routeBreaker[f.Name], Builtin: f.Name == "" || f.Name[0] == '(',
		})
	}
	if interval > 0 {
		d := all.Sub(&allPrev)
		t.totals.P50, t.totals.P95, t.totals.P99, t.totals.P999 = ms(d.Quantile(0.5)), ms(d.Quantile(0.95)), ms(d.Quantile(0.99)), ms(d.Quantile(0.999))
	}
	c.routes = curRoutes

	curSvcs := map[string]observe.ServiceFigures{}
	for _, f := range m.ReadServices() {
		curSvcs[f.Name] = f
		p := c.svcs[f.Name]
		d := f.Latency.Sub(&p.Latency)
		t.services = append(t.services, liveService{
			Name: f.Name, RPS: rate(f.Latency.Count(), p.Latency.Count()),
			P50: ms(d.Quantile(0.5)), P99: ms(d.Quantile(0.99)), Failures: rate(f.Failures, p.Failures),
			Breaker: h.svcBreaker[f.Name],
		})
	}
	c.svcs = curSvcs

	curDecided := map[string]uint64{}
	for _, d := range m.ReadDecisions() {
		key := d.Decision + "\x00" + strconv.Itoa(d.Code)
		curDecided[key] = d.Count
		t.decisions = append(t.decisions, liveDecision{Decision: d.Decision, Code: d.Code, Total: d.Count, Rate: rate(d.Count, c.decided[key])})
	}
	c.decided = curDecided
	sort.SliceStable(t.decisions, func(i, j int) bool {
		if t.decisions[i].Rate != t.decisions[j].Rate {
			return t.decisions[i].Rate > t.decisions[j].Rate
		}
		return t.decisions[i].Total > t.decisions[j].Total
	})
	if len(t.decisions) > 20 {
		t.decisions = t.decisions[:20]
	}
	return t
}

// redisFigures is the dashboard's cluster panel: Redis's health and the
// node count.
func (s *Server) redisFigures() map[string]any {
	redis := map[string]any{"mode": "standalone"}
	if f := s.deps.Ops.Cluster; f != nil {
		if cl := f(); cl != nil {
			st := cl.Stats()
			redis = map[string]any{"mode": "cluster", "healthy": st.Healthy, "degraded": st.Degraded,
				"timeouts": st.Timeouts, "errors": st.Errors, "in_flight": st.InFlight}
		}
	}
	if f := s.deps.Ops.Nodes; f != nil {
		redis["nodes"] = f()
	}
	return redis
}
