package main

import (
	"runtime"
	"time"

	"github.com/tollgate/tollgate/auth"
	"github.com/tollgate/tollgate/auth/jwt"
	"github.com/tollgate/tollgate/config"
)

// stats is GET /admin/stats: the process's figures, read when asked.
func (p *process) stats() any {
	gw, compiler := p.gw, p.compiler
	st := map[string]any{
		"requests":       gw.Stats.Read(),
		"conns":          p.transport.Conns(),
		"goroutines":     runtime.NumGoroutine(),
		"config_version": gw.Snapshot().Version,
	}
	if p.accessLog != nil {
		st["access_log_dropped"] = p.accessLog.Dropped()
	}
	replays, degraded := auth.NonceStats(gw.Snapshot().Env())
	st["nonces"] = map[string]uint64{"replays_refused": replays, "decided_without_redis": degraded}
	st["clock_back_steps"] = compiler.Clock.BackSteps()
	if cl := compiler.Cluster(); cl != nil {
		st["redis"] = map[string]any{"healthy": cl.Healthy(), "stats": cl.Stats()}
	}
	st["cluster_nodes"] = clusterNodes(compiler, gw.Snapshot().File)
	if p.follower != nil {
		st["cluster_config"] = p.follower.Status()
	}
	st["waf"] = wafCounts(gw.Snapshot())
	if p.secure != nil && p.secure.h2 != nil {
		st["http2"] = p.secure.h2.Stats()
	}
	if p.h2c != nil {
		st["h2c"] = p.h2c.Stats()
	}
	return st
}

// revoker returns the admin API's way to revoke tokens, nil without a
// cluster or a jwt section in snap.
func revoker(compiler *config.Compiler, snap *config.Snapshot) func(string, time.Duration) error {
	cl := compiler.Cluster()
	j, ok := jwt.SectionKey.Get(snap.Env())
	if cl == nil || !ok {
		return nil
	}
	key := j.Settings.RevocationKey
	return func(member string, ttl time.Duration) error { return cl.AddToSet(key, member, ttl) }
}

// clusterNodes is how many nodes share the cluster: the configured count,
// or the live membership seen through Redis (1 when standalone).
func clusterNodes(compiler *config.Compiler, f *config.File) int {
	if n := f.Cluster.FixedNodes(); n > 0 {
		return n
	}
	if cl := compiler.Cluster(); cl != nil {
		return cl.LiveNodes()
	}
	return 1
}

// wafCounts reports each WAF route's detections: sqli and xss found, how
// many requests were blocked (the rest were logged), and the bodies it
// could not read whole, in all and by reason.
func wafCounts(snap *config.Snapshot) map[string]any {
	return routeStates(snap, "waf")
}
