package config

import (
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/cluster"
)

// clusterClient returns the node's Redis client, created on first use. The
// address is read once: changing it needs a restart (a reload says so).
func (c *Compiler) clusterClient(f *File) (*cluster.Client, error) {
	if f.Cluster.Redis == "" || c.Offline {
		return nil, nil
	}
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	if c.cluster != nil {
		return c.cluster, nil
	}
	tlsCfg, err := f.Cluster.TLS.Config()
	if err != nil {
		return nil, fmt.Errorf("cluster.tls: %w", err)
	}
	cl, err := cluster.New(cluster.Options{
		Addrs:    splitList(f.Cluster.Redis),
		Password: f.Cluster.Password,
		TLS:      tlsCfg,
		NodeID:   f.NodeID,
		Budget:   f.Cluster.Budget.D(),
		Logger:   c.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("cluster.redis: %w", err)
	}
	c.cluster = cl
	return cl, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
