package main

import (
	"context"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/admin"
	"github.com/tollgate/tollgate/anomaly"
	"github.com/tollgate/tollgate/cluster"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/history"
	"github.com/tollgate/tollgate/observe"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/server"
	"github.com/tollgate/tollgate/upstream"
	"go.uber.org/zap"
)

// ops wires the operations side: metrics, readiness and drain state.
type ops struct {
	metrics *observe.Metrics // nil with admin.metrics: off
	history *history.Local   // each route's traffic by hour; nil without metrics
	alerts  *anomaly.Engine  // departures from each route's usual figures; nil without metrics
	webhook *anomaly.Webhook
	// ready is set once the first configuration serves; draining from the
	// moment SIGTERM arrives, so /readyz turns 503 before the listener
	// closes.
	ready, draining atomic.Bool
}

func newOps(f *config.File) *ops {
	o := &ops{}
	if f.Admin.Metrics != "off" {
		o.metrics = observe.NewMetrics()
		o.history = history.NewLocal(0)
	}
	return o
}

// recordHistory keeps each route's traffic by minute, from the metrics'
// counters, in the node's hours and, on a cluster, in Redis (for tollgate
// limits suggest), until stop is closed.
func (o *ops) recordHistory(cl *cluster.Client, log *zap.Logger, stop <-chan struct{}) {
	if o.metrics == nil {
		return
	}
	r := &history.Recorder{Totals: o.routeTotals, Sinks: []history.Sink{o.history}}
	if cl != nil {
		r.Sinks = append(r.Sinks, &history.Redis{Client: cl, Log: log})
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-stop
		cancel()
	}()
	go r.Run(ctx)
}

// watchAnomalies raises alerts when a route departs from its usual
// figures (the alerts section), until stop is closed.
func (o *ops) watchAnomalies(gw *server.Gateway, node string, log *zap.Logger, stop <-chan struct{}) {
	if o.metrics == nil {
		return
	}
	o.webhook = &anomaly.Webhook{Log: log}
	o.webhook.Start(stop)
	o.alerts = &anomaly.Engine{
		Routes: o.metrics.ReadRoutes,
		Settings: func() anomaly.Settings {
			s, ok := anomaly.SettingsKey.Get(gw.Snapshot().Env())
			if !ok {
				s.Off = true
				s.Interval = time.Second
			}
			return s
		},
		Degrade: func(route string) pipeline.Switcher {
			sw, _ := gw.Snapshot().RoutePart(route, "degrade").(pipeline.Switcher)
			return sw
		},
		Node: node,
		Log:  log,
		Send: o.webhook.Send,
	}
	go o.alerts.Run(stop)
}

// routeTotals is every route's requests since the start.
func (o *ops) routeTotals() map[string]uint64 {
	figures := o.metrics.ReadRoutes()
	out := make(map[string]uint64, len(figures))
	for _, f := range figures {
		var n uint64
		for _, c := range f.ByClass {
			n += c
		}
		out[f.Name] = n
	}
	return out
}

// settled records that the file is back to what runs (see
// observe.Metrics.Settled).
func (o *ops) settled(version uint64) {
	if o.metrics != nil {
		o.metrics.Settled("file back to the running configuration", version)
	}
}

// loaded records a configuration load (start or reload). On success it
// prepares the new snapshot's series before the snapshot goes live.
func (o *ops) loaded(next *config.Snapshot, err error, reason string, running uint64) {
	if o.metrics == nil {
		return
	}
	r := observe.ReloadResult{At: time.Now(), OK: err == nil, Reason: reason, Version: running}
	if err != nil {
		r.Error = err.Error()
	} else {
		r.Version = next.Version
		routes := make([]string, 0, len(next.Routes))
		for _, rt := range next.Routes {
			routes = append(routes, rt.Name)
		}
		if next.Default != nil {
			routes = append(routes, "(default)")
		}
		if next.Fallback != nil {
			routes = append(routes, "(fallback)")
		}
		byName := upstream.ServicesOf(next.Env())
		services := make([]string, 0, len(byName))
		for name := range byName {
			services = append(services, name)
		}
		o.metrics.SetRoutes(routes, services)
	}
	o.metrics.Reloaded(r)
}

// wire makes the gateway report every request to the metrics and adds the
// gateway's own scrape-time figures.
func (o *ops) wire(gw *server.Gateway, tr server.Transport, accessLog *observe.AccessLog, compiler *config.Compiler) {
	m := o.metrics
	if m == nil {
		return
	}
	gw.AddObserver(m)
	m.AddSource(func(s *observe.Scrape) {
		st := gw.Stats.Read()
		conns := tr.Conns()
		active := int(st.InFlight)
		idle := max(conns-active, 0)
		const connHelp = "Open client connections: active (a request in flight) or idle (keep-alive, waiting)."
		s.Gauge("tollgate_client_connections", connHelp, float64(active), "state", "active")
		s.Gauge("tollgate_client_connections", connHelp, float64(idle), "state", "idle")
		s.Gauge("tollgate_requests_in_flight", "Requests being served now.", float64(st.InFlight))
		var dropped, written, rotated, failed uint64 // 0 with the access log off
		if accessLog != nil {
			dropped, written = accessLog.Dropped(), accessLog.Written()
			rotated, failed = accessLog.Rotations()
		}
		s.Counter("tollgate_access_log_dropped_total", "Access log lines dropped because the writer fell behind (queue full) or the file could not be written.", float64(dropped))
		s.Counter("tollgate_access_log_written_total", "Access log lines handed to the writer.", float64(written))
		const rotHelp = "Rotations of the access log file by size (access_log.max_file_bytes): done, or failed (the lines went on into the current file)."
		s.Counter("tollgate_access_log_rotations_total", rotHelp, float64(rotated), "result", "ok")
		s.Counter("tollgate_access_log_rotations_total", rotHelp, float64(failed), "result", "failed")
		s.Counter("tollgate_clock_back_steps_total", "Times the host clock stepped back (the gateway's clock held).", float64(compiler.Clock.BackSteps()))
		ready, draining := 0.0, 0.0
		if ok, _ := o.readiness(); ok {
			ready = 1
		}
		if o.draining.Load() {
			draining = 1
		}
		if rl, ok := tr.(interface{ IOUringLoops() int }); ok {
			s.Gauge("tollgate_io_uring_loops", "Event loops making their socket calls in batches through an io_uring (io_uring: auto or on); the others make one syscall each.", float64(rl.IOUringLoops()))
		}
		if sa, ok := tr.(interface {
			StreamedAnswers() (uint64, uint64, uint64)
		}); ok {
			done, cut, stalled := sa.StreamedAnswers()
			const help = "Answers longer than the service's answer_window, streamed from the backend as the client took them, by how they ended: written whole, cut (the backend broke off or passed max_response_bytes, or the client's connection failed), or stalled (the client took less than a window within write_timeout)."
			s.Counter("tollgate_streamed_answers_total", help, float64(done), "result", "ok")
			s.Counter("tollgate_streamed_answers_total", help, float64(cut), "result", "cut")
			s.Counter("tollgate_streamed_answers_total", help, float64(stalled), "result", "stalled")
		}
		s.Gauge("tollgate_ready", "Whether /readyz answers 200 (the node wants traffic).", ready)
		s.Gauge("tollgate_draining", "Whether the node is draining after SIGTERM.", draining)
		s.Gauge("tollgate_build_info", "The running build (value 1).", 1, "version", version, "goversion", runtime.Version())
	})
}

// readiness is /readyz: not before the first configuration serves (in
// cluster mode that is after Redis answered once or the node decided to
// run on its local split: the cluster client decides before the first
// configuration is built), and never once draining.
func (o *ops) readiness() (bool, string) {
	switch {
	case o.draining.Load():
		return false, "draining"
	case !o.ready.Load():
		return false, "starting"
	}
	return true, ""
}

// admin returns what the admin API's operations endpoints read.
func (o *ops) admin(compiler *config.Compiler, gw *server.Gateway) admin.Ops {
	a := admin.Ops{
		Metrics: o.metrics,
		History: o.history,
		Alerts:  o.alerts,
		Webhook: o.webhook,
		Ready:   o.readiness,
		Cluster: func() *cluster.Client { return compiler.Cluster() },
		Nodes:   func() int { return clusterNodes(compiler, gw.Snapshot().File) },
	}
	if cl := compiler.Cluster(); cl != nil && gw.Snapshot().File.Cluster.FixedNodes() == 0 {
		a.NodeLoads = cl.NodeLoads
	}
	return a
}

// join makes this node a member of the cluster (cluster.nodes: auto): it
// heartbeats, and each heartbeat carries the node's request rates, from
// the counters the gateway keeps anyway, for the other nodes' dashboards.
func join(cl *cluster.Client, nodeID string, gw *server.Gateway) {
	cl.ReportCounts(func() cluster.Counts {
		st := gw.Stats.Read()
		return cluster.Counts{Requests: st.Requests, C4xx: st.ByClass[4], C5xx: st.ByClass[5]}
	})
	cl.Heartbeat(nodeID, time.Second)
}

// waitDrainDelay waits d after SIGTERM (readyz already 503, answers
// closing their connections) so balancers take the node out before the
// listener closes; a second SIGTERM or SIGINT cuts it short.
func waitDrainDelay(d time.Duration, sigs <-chan os.Signal) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return
		case sig := <-sigs:
			if sig == syscall.SIGTERM || sig == syscall.SIGINT {
				return
			}
		}
	}
}
