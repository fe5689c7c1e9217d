package config

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Source says where a node's configuration comes from.
type Source struct {
	// Source is file (default: the file given with -c, reloaded on
	// change, SIGHUP or the admin API) or redis: the version pushed with
	// `tollgate config push`, which every node of the cluster follows.
	Source string `yaml:"source"`
	// LocalCopy is where a redis-following node keeps the last version
	// it ran, to start on it while Redis is unavailable; default
	// DefaultLocalCopy with the node's id in the name (LocalCopyFor), so
	// that nodes sharing a host keep one each.
	LocalCopy string `yaml:"local_copy"`
	// Poll is how often a redis-following node checks the current
	// version besides being told of changes by Redis; default 3s. Through
	// the client-side cache a check costs Redis nothing while nothing
	// changed.
	Poll Duration `yaml:"poll"`
}

// DefaultLocalCopy is where a node keeps its last configuration from
// Redis, NODE_ID standing for its node id (LocalCopyFor).
const DefaultLocalCopy = "/var/lib/tollgate/config-copy-NODE_ID.yaml"

// LocalCopyFor is the default local copy of the node nodeID: two nodes on
// one host (ports of their own, so ids of their own) must not overwrite
// each other's copy and start, while Redis is away, on the other's.
func LocalCopyFor(nodeID string) string {
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, nodeID)
	if len(safe) > 128 {
		safe = safe[:128]
	}
	return strings.Replace(DefaultLocalCopy, "NODE_ID", safe, 1)
}

// FromRedis reports whether the node follows the configuration in Redis.
func (s Source) FromRedis() bool { return s.Source == "redis" }

func (s *Source) defaults(nodeID string) {
	if s.Source == "" {
		s.Source = "file"
	}
	if s.LocalCopy == "" {
		s.LocalCopy = LocalCopyFor(nodeID)
	}
	setDur(&s.Poll, 3*time.Second)
}

func (s Source) validate(f *File) error {
	switch s.Source {
	case "file":
	case "redis":
		if f.Cluster.Redis == "" {
			return errors.New("config.source redis needs cluster.redis (or TOLLGATE_REDIS)")
		}
	default:
		return fmt.Errorf("config.source %q: want file or redis", s.Source)
	}
	if s.Poll.D() < 100*time.Millisecond {
		return fmt.Errorf("config.poll %v: want at least 100ms", s.Poll.D())
	}
	return nil
}
