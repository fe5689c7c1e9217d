package config

import (
	"github.com/tollgate/tollgate/cluster"
	"github.com/tollgate/tollgate/pipeline"
)

// shareCluster puts what limits need from the top-level sections into the
// build environment: the Redis client, the node count local limits are
// split by and the quotas the consumers declare.
func shareCluster(env *pipeline.Env, f *File, cl *cluster.Client) {
	if cl != nil {
		cluster.EnvKey.Set(env, cl)
	}
	switch n := f.Cluster.FixedNodes(); {
	case n > 0:
		cluster.NodesEnvKey.Set(env, cluster.FixedNodes(n))
	case cl != nil:
		cluster.NodesEnvKey.Set(env, cl) // membership (run starts the heartbeat)
	default:
		cluster.NodesEnvKey.Set(env, cluster.FixedNodes(1))
	}
	quotas := map[string]pipeline.Quota{}
	for _, cc := range f.Consumers {
		if cc == nil {
			continue
		}
		switch {
		case cc.QPS > 0:
			quotas[cc.AppKey] = pipeline.Quota{Tier: "custom", QPS: cc.QPS}
		default:
			tier := cc.Tier
			if tier == "" {
				tier = "free"
			}
			quotas[cc.AppKey] = pipeline.Quota{Tier: tier}
		}
	}
	pipeline.ConsumerQuotasKey.Set(env, quotas)
}
