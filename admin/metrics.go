package admin

import (
	"github.com/tollgate/tollgate/discovery"
	"sort"

	"github.com/tollgate/tollgate/anomaly"
	"github.com/tollgate/tollgate/cluster"

	"github.com/tollgate/tollgate/auth"
	"github.com/tollgate/tollgate/breaker"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/observe"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/upstream"
)

// Scrape-time figures of the running snapshot, the cluster client and the
// admin API itself. Everything here is read when Prometheus asks; nothing
// runs per request.

// breakerStates are the values of tollgate_breaker_state.
var breakerStates = map[string]float64{"closed": 0, "half_open": 1, "open": 2}

// redisBounds are cluster.LatencyBounds in seconds.
var redisBounds = func() []float64 {
	out := make([]float64, len(cluster.LatencyBounds))
	for i, d := range cluster.LatencyBounds {
		out[i] = d.Seconds()
	}
	return out
}()

func (s *Server) reportAdmin(sc *observe.Scrape) {
	sc.Counter("tollgate_admin_auth_failures_total", "Admin requests refused for a missing or wrong token.",
		float64(s.ops.authMissing.Load()), "token", "missing")
	sc.Counter("tollgate_admin_auth_failures_total", "Admin requests refused for a missing or wrong token.",
		float64(s.ops.authWrong.Load()), "token", "wrong")
	sc.Counter("tollgate_admin_changes_total", "Operators' changes through the admin API (breakers, degrade, instances, recording).",
		float64(s.prot.changes.Load()))
	s.reportAlerts(sc)
	snap := s.deps.Snapshot()
	if snap == nil {
		return
	}
	reportSnapshot(sc, snap)
	if f := s.deps.Ops.Nodes; f != nil {
		sc.Gauge("tollgate_cluster_nodes", "Nodes sharing the cluster's limits (live membership, or the configured count; 1 standalone).", float64(f()))
	}
	if f := s.deps.Ops.Cluster; f != nil {
		if cl := f(); cl != nil {
			st := cl.Stats()
			up := 0.0
			if st.Healthy {
				up = 1
			}
			sc.Gauge("tollgate_redis_up", "Whether Redis answers (1) or the node runs degraded on local decisions (0).", up)
			sc.Counter("tollgate_redis_degraded_total", "Times the node entered degraded mode (Redis slow or away).", float64(st.Degraded))
			sc.Counter("tollgate_redis_recovered_total", "Times the node left degraded mode.", float64(st.Recovered))
			const failHelp = "Request-path Redis calls that got no answer in time, by reason."
			sc.Counter("tollgate_redis_call_failures_total", failHelp, float64(st.Timeouts), "reason", "timeout")
			sc.Counter("tollgate_redis_call_failures_total", failHelp, float64(st.Errors), "reason", "error")
			sc.Counter("tollgate_redis_call_failures_total", failHelp, float64(st.Saturated), "reason", "saturated")
			sc.Counter("tollgate_redis_call_failures_total", failHelp, float64(st.Refused), "reason", "degraded")
			sc.Gauge("tollgate_redis_calls_in_flight", "Request-path Redis calls running now.", float64(st.InFlight))
			sc.Counter("tollgate_redis_backfilled_total", "Nonce claims decided while degraded and written to Redis after recovery.", float64(st.Backfilled))
			sc.Counter("tollgate_redis_backfill_dropped_total", "Nonce claims decided while degraded that the backlog had no room for.", float64(st.BackfillDropped))
			sc.Counter("tollgate_redis_lease_calls_total", "Lease commands sent for cluster limits.", float64(st.Scripts))
			const latHelp = "Duration of Redis calls that got an answer or an error: nonce claims and lease calls."
			for _, c := range []struct {
				op string
				l  cluster.Latency
			}{{"claim", st.ClaimLatency}, {"lease", st.ScriptLatency}} {
				sc.Histogram("tollgate_redis_call_seconds", latHelp, redisBounds, c.l.Counts[:], c.l.Sum.Seconds(), "op", c.op)
			}
		}
	}
}

// reportSnapshot adds the figures of the running configuration: its
// version, nonce counters, breakers, instances and what features report.
func reportSnapshot(sc *observe.Scrape, snap *config.Snapshot) {
	sc.Gauge("tollgate_config_version", "Version of the running configuration (1 at start, +1 per applied reload).", float64(snap.Version))
	sc.Gauge("tollgate_config_loaded_timestamp_seconds", "When the running configuration was loaded (Unix time).", float64(snap.Loaded.UnixNano())/1e9)
	sc.Gauge("tollgate_routes", "Routes in the running configuration.", float64(len(snap.Routes)))
	replays, degraded := auth.NonceStats(snap.Env())
	sc.Counter("tollgate_nonce_replays_total", "Signed requests refused because their nonce was already used.", float64(replays))
	sc.Counter("tollgate_nonce_claims_degraded_total", "Nonce claims decided by this node alone because Redis did not answer within the budget.", float64(degraded))

	const stateHelp = "Circuit breaker state: 0 closed, 1 half-open, 2 open."
	const tripsHelp = "Times the circuit breaker opened."
	report := func(scope, name string, b *breaker.Breaker) {
		st := b.Status()
		sc.Gauge("tollgate_breaker_state", stateHelp, breakerStates[st.State], "scope", scope, "name", name)
		sc.Counter("tollgate_breaker_trips_total", tripsHelp, float64(st.Trips), "scope", scope, "name", name)
	}
	snap.Inspectors(func(route string, in pipeline.Inspector) {
		if route == "" {
			return
		}
		if g, ok := in.(guard); ok && config.Shows(in, "breaker") {
			report("route", route, g.Breaker())
		}
		if d, ok := in.(degrader); ok && config.Shows(in, "degrade") {
			on := 0.0
			if d.On() {
				on = 1
			}
			sc.Gauge("tollgate_degrade_on", "Whether an operator switched the route to its degraded answer.", on, "route", route)
			sc.Counter("tollgate_degraded_answers_total", "Degraded answers the route gave.", float64(d.Served()), "route", route)
		}
	})
	names := make([]string, 0, len(upstream.ServicesOf(snap.Env())))
	for name := range upstream.ServicesOf(snap.Env()) {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		svc := upstream.ServicesOf(snap.Env())[name]
		if b := svc.Breaker(); b != nil {
			report("service", name, b)
		}
		for _, in := range svc.Instances() {
			reportInstance(sc, name, in.Status())
		}
		if m := svc.Members(); m != nil {
			reportDiscovery(sc, name, m.Watch().Status())
		}
	}
	snap.Reporters(func(route string, r pipeline.Reporter) {
		r.Report(func(f *pipeline.Family, v float64, labels ...string) {
			if len(labels) != len(f.Labels) {
				return
			}
			pairs := make([]string, 0, 2*len(labels)+2)
			if route != "" {
				pairs = append(pairs, "route", route)
			}
			for i, l := range labels {
				pairs = append(pairs, f.Labels[i], l)
			}
			if f.Type == pipeline.Gauge {
				sc.Gauge(f.Name, f.Help, v, pairs...)
			} else {
				sc.Counter(f.Name, f.Help, v, pairs...)
			}
		})
	})
}

// reportDiscovery adds the figures of a discovered service's registry
// watch.
func reportDiscovery(sc *observe.Scrape, service string, st discovery.Status) {
	l := []string{"service", service, "target", st.Target}
	sc.Gauge("tollgate_discovery_instances", "Instances the registry lists for the service (the set the gateway serves).", float64(st.Instances), l...)
	sc.Gauge("tollgate_discovery_last_change_timestamp_seconds", "When the service's instance set last changed (Unix time).", float64(st.Changed.UnixNano())/1e9, l...)
	sc.Counter("tollgate_discovery_changes_total", "Changes of the service's instance set taken from the registry.", float64(st.Changes), l...)
	sc.Counter("tollgate_discovery_failures_total", "Registry reads that failed (refused, an error answer, a timeout); the last set kept serving.", float64(st.Failures), l...)
	failing, held, saved := 0.0, 0.0, 0.0
	if st.Failing {
		failing = 1
	}
	if !st.EmptySince.IsZero() {
		held = 1
	}
	if st.Saved {
		saved = 1
	}
	sc.Gauge("tollgate_discovery_failing", "Whether the registry's last read failed (1): the set is the last one known.", failing, l...)
	sc.Gauge("tollgate_discovery_empty_held", "Whether the registry lists no instance and the last set serves out the empty_grace (1).", held, l...)
	sc.Gauge("tollgate_discovery_from_saved_copy", "Whether the set is the copy saved on disk, the registry not having answered since start (1).", saved, l...)
}

func reportInstance(sc *observe.Scrape, service string, st upstream.InstanceStatus) {
	l := []string{"service", service, "instance", st.Addr}
	up, ejected, disabled := 0.0, 0.0, 0.0
	switch st.State {
	case "up":
		up = 1
	case "ejected":
		ejected = 1
	case "disabled":
		disabled = 1
	}
	sc.Gauge("tollgate_upstream_instance_up", "Whether the instance gets traffic (1), or is out: ejected or disabled (0).", up, l...)
	sc.Gauge("tollgate_upstream_instance_ejected", "Whether the instance is ejected for failing and being probed back.", ejected, l...)
	sc.Gauge("tollgate_upstream_instance_disabled", "Whether an operator disabled the instance.", disabled, l...)
	sc.Counter("tollgate_upstream_ejections_total", "Times the instance was ejected.", float64(st.Ejections), l...)
	sc.Counter("tollgate_upstream_instance_requests_total", "Requests sent to the instance (retries included).", float64(st.Requests), l...)
	sc.Counter("tollgate_upstream_instance_errors_total", "Connection-level failures of the instance (timeouts, refusals, resets).", float64(st.Errors), l...)
	sc.Gauge("tollgate_upstream_in_flight", "Requests waiting on the instance now.", float64(st.InFlight), l...)
	sc.Gauge("tollgate_upstream_connections", "Open connections to the instance (pooled idle and busy).", float64(st.Conns), l...)
}

// reportAlerts writes the anomaly alerts' series.
func (s *Server) reportAlerts(sc *observe.Scrape) {
	e := s.deps.Ops.Alerts
	if e == nil {
		return
	}
	f := e.Figures()
	for _, sig := range []anomaly.Signal{anomaly.SignalRate, anomaly.SignalErrors, anomaly.SignalLatency} {
		sc.Counter("tollgate_anomaly_alerts_total", "Alerts raised: a route departing from its usual request rate, error share or latency.",
			float64(f.Raised[sig]), "signal", string(sig))
	}
	for _, a := range f.Active {
		sc.Gauge("tollgate_anomaly_active", "Alerts holding now, by route and signal.", 1, "route", a.Route, "signal", string(a.Signal))
	}
	if w := s.deps.Ops.Webhook; w != nil {
		wf := w.Figures()
		const help = "Alerts sent to the alerts webhook, given up after three tries, or dropped with the queue full."
		sc.Counter("tollgate_alert_webhook_total", help, float64(wf.Sent), "result", "sent")
		sc.Counter("tollgate_alert_webhook_total", help, float64(wf.Failed), "result", "failed")
		sc.Counter("tollgate_alert_webhook_total", help, float64(wf.Dropped), "result", "dropped")
	}
}
