package main

import (
	"time"

	"github.com/tollgate/tollgate/cluster"
	"github.com/tollgate/tollgate/config"
)

// redisFollower returns the follower of the cluster's configuration when
// the node's file (or TOLLGATE_CONFIG_SOURCE) says config.source redis,
// nil otherwise (the file is the configuration; its errors are reported
// when it is loaded).
func redisFollower(compiler *config.Compiler, path string, lookup func(string) (string, bool)) (*config.Follower, error) {
	if path == "" {
		return nil, nil
	}
	f, _, err := config.ReadFile(path, lookup)
	if err != nil {
		return nil, nil
	}
	if !f.Config.FromRedis() {
		return nil, nil
	}
	return config.NewFollower(compiler, path, lookup)
}

// reportStatus makes the node's heartbeats say where it listens, which
// configuration version it runs and the last one it refused, for
// `tollgate config status`.
func reportStatus(cl *cluster.Client, listen string, follower *config.Follower) {
	started := time.Now()
	cl.ReportStatus(func() cluster.NodeInfo {
		info := cluster.NodeInfo{Addr: listen, Started: started}
		if follower != nil {
			st := follower.Status()
			info.ConfigVersion, info.LastError = st.Version, st.LastError
		}
		return info
	})
}
