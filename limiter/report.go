package limiter

import (
	"strconv"
	"time"

	"github.com/tollgate/tollgate/pipeline"
)

// Metric families of limits (pipeline.Reporter).
var (
	metricAllowed = &pipeline.Family{Name: "tollgate_limit_allowed_total", Type: pipeline.Counter,
		Help: "Requests a limit rule admitted.", Labels: []string{"rule"}}
	metricRefused = &pipeline.Family{Name: "tollgate_limit_refusals_total", Type: pipeline.Counter,
		Help: "Requests refused by a limit rule, by answer status.", Labels: []string{"rule", "code"}}
	metricFallback = &pipeline.Family{Name: "tollgate_limit_fallback_decisions_total", Type: pipeline.Counter,
		Help: "Decisions of cluster limits taken on the local split while Redis was unavailable.", Labels: []string{"rule"}}
	metricClusterMode = &pipeline.Family{Name: "tollgate_limit_cluster_mode", Type: pipeline.Gauge,
		Help: "1 while a cluster limit decides on Redis token leases, 0 while it falls back to the local split.", Labels: []string{"rule"}}
	metricKeys = &pipeline.Family{Name: "tollgate_limit_keys", Type: pipeline.Gauge,
		Help: "Keys with a counter on this node.", Labels: []string{"rule"}}
	metricLiveNodes = &pipeline.Family{Name: "tollgate_limit_live_nodes", Type: pipeline.Gauge,
		Help: "Nodes a limit's rate is split by.", Labels: []string{"rule"}}
)

// Report implements pipeline.Reporter (read at scrape time).
func (f *Filter) Report(emit pipeline.Emit) {
	for _, r := range f.rules {
		code := strconv.Itoa(r.refusal.Status)
		if r.challenge != nil {
			code = strconv.Itoa(r.challenge.Status)
		}
		emit(metricAllowed, float64(r.counts.allowed.Load()), r.name)
		emit(metricRefused, float64(r.counts.refused.Load()), r.name, code)
		emit(metricLiveNodes, float64(r.nodes.LiveNodes()), r.name)
		if r.local != nil {
			emit(metricKeys, float64(r.local.keys()), r.name)
		}
		if r.lease != nil {
			emit(metricKeys, float64(r.lease.keys()), r.name)
			emit(metricFallback, float64(r.counts.fallback.Load()), r.name)
			mode := 0.0
			if r.mgr.inCluster.Load() {
				mode = 1
			}
			emit(metricClusterMode, mode, r.name)
		}
	}
}

// RuleReport is one rule as /admin/limits shows it.
type RuleReport struct {
	Route     string  `json:"route"`
	Rule      string  `json:"rule"`
	By        string  `json:"by"`
	Scope     string  `json:"scope"`
	Algorithm string  `json:"algorithm"`
	Rate      float64 `json:"rate,omitempty"` // per Per; 0 for a tier quota (per consumer)
	Per       string  `json:"per"`
	Burst     float64 `json:"burst,omitempty"`
	TierQuota bool    `json:"tier_quota,omitempty"`
	Share     float64 `json:"share,omitempty"`
	RejectFor string  `json:"reject_for,omitempty"`
	Status    int     `json:"status"`
	// Mode is how the rule decides now: local, cluster, local fallback
	// (Redis unavailable), or local (no redis).
	Mode      string `json:"mode"`
	LiveNodes int    `json:"live_nodes"`
	// NodeRate is this node's share of Rate when it decides alone.
	NodeRate float64 `json:"node_rate,omitempty"`
	// Keys are the keys with a counter on this node; Evictions those
	// dropped to make room, EvictedActive of them not yet fresh.
	Keys          int    `json:"keys"`
	Evictions     uint64 `json:"evictions"`
	EvictedActive uint64 `json:"evicted_active,omitempty"`
	// Decisions on this node since the rule was created.
	Allowed  uint64 `json:"allowed"`
	Refused  uint64 `json:"refused"`
	Blocked  uint64 `json:"blocked"`  // refused under reject_for
	Missing  uint64 `json:"missing"`  // requests without the key's value
	Fallback uint64 `json:"fallback"` // cluster rule decided locally
	Delayed  uint64 `json:"delayed,omitempty"`
	// Lease is a cluster rule's tokens on this node.
	Lease *LeaseReport `json:"lease,omitempty"`
}

// LeaseReport is a cluster rule's leasing on this node.
type LeaseReport struct {
	Held     int64   `json:"tokens_held"`
	Debt     int64   `json:"tokens_ahead"`
	LeaseAvg float64 `json:"lease_size_avg"`
	// The node's lease worker (shared by every cluster rule).
	Calls      uint64 `json:"worker_calls"`
	Granted    uint64 `json:"worker_granted"`
	Errors     uint64 `json:"worker_errors"`
	Fallbacks  uint64 `json:"worker_fallbacks"`
	Recoveries uint64 `json:"worker_recoveries"`
	// BlocksShared counts reject_for trips announced to the other nodes.
	BlocksShared uint64 `json:"blocks_shared"`
}

// Rules describes the filter's rules (GET /admin/limits).
func (f *Filter) Rules() []RuleReport {
	out := make([]RuleReport, 0, len(f.rules))
	for _, r := range f.rules {
		n := r.nodes.LiveNodes()
		rep := RuleReport{
			Route: f.route, Rule: r.name, By: r.dim.text, Scope: r.scope.String(), Algorithm: r.alg.String(),
			Per: r.per.String(), TierQuota: r.tier, Share: r.share, Status: r.refusal.Status,
			Mode: r.mode(), LiveNodes: n,
			Allowed: r.counts.allowed.Load(), Refused: r.counts.refused.Load(), Blocked: r.counts.blocked.Load(),
			Missing: r.counts.missing.Load(), Fallback: r.counts.fallback.Load(), Delayed: r.counts.delayed.Load(),
		}
		if r.rejectFor > 0 {
			rep.RejectFor = time.Duration(r.rejectFor).String()
		}
		if r.challenge != nil {
			rep.Status = r.challenge.Status
		}
		if !r.tier {
			rep.Rate, rep.Burst = r.rate, r.base.Burst()
			if r.alg.windowed() {
				rep.Burst = 0
			}
			rep.NodeRate = r.base.Split(n).Rate()
		}
		if r.local != nil {
			st := r.local.stats()
			rep.Keys, rep.Evictions, rep.EvictedActive = st.Keys, st.Evictions, st.ActiveEvict
		}
		if r.lease != nil {
			st := r.lease.stats()
			m := r.mgr
			rep.Keys, rep.Evictions = st.Keys, m.evictions.Load()
			rep.Lease = &LeaseReport{Held: st.Held, Debt: st.Debt, LeaseAvg: st.LeaseAvg,
				Calls: m.calls.Load(), Granted: m.granted.Load(), Errors: m.errors.Load(),
				Fallbacks: m.fallbacks.Load(), Recoveries: m.recoveries.Load(), BlocksShared: m.shared.Load()}
		}
		out = append(out, rep)
	}
	return out
}
