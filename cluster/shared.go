package cluster

import "github.com/tollgate/tollgate/pipeline"

// Keys of the build environment's shared objects: config puts the objects
// built from the top-level cluster section there for the features that
// need them.
var (
	// EnvKey holds this node's *Client; absent when standalone.
	EnvKey = pipeline.NewKey[*Client]("cluster.client")
	// NodesEnvKey holds how many gateway nodes share the cluster's limits
	// (the membership, or a fixed count).
	NodesEnvKey = pipeline.NewKey[Nodes]("cluster.nodes")
)

// Nodes reports how many gateway nodes share the cluster's limits. *Client
// (its membership, after Heartbeat) and FixedNodes implement it.
// LiveNodes is cheap, never blocks and is at least 1.
type Nodes interface {
	LiveNodes() int
}

// FixedNodes is a node count set by configuration (cluster.nodes: N,
// TOLLGATE_NODES), or 1 for a standalone node.
type FixedNodes int

// LiveNodes implements Nodes.
func (n FixedNodes) LiveNodes() int { return max(1, int(n)) }
