package config

import (
	"github.com/tollgate/tollgate/cluster"
	"github.com/tollgate/tollgate/pipeline"
)

// shareCluster puts what the cluster section makes into the build
// environment: the Redis client and the node count local limits are
// split by.
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
}
