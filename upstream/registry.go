package upstream

import (
	"github.com/tollgate/tollgate/pipeline"
	"go.uber.org/zap"
)

// instanceSettings are what an instance is built from: snapshots that
// name the same share it.
type instanceSettings struct {
	Addr   string
	Weight int
	Pool   Pool
	Health Health
}

// instanceKey is the state key of an instance: a digest of every field of
// its settings (pipeline.Digest), defaults written in.
func instanceKey(addr string, weight int, p Pool, h Health) string {
	return "upstream.instance|" + pipeline.Digest(instanceSettings{Addr: addr, Weight: weight, Pool: p.withDefaults(), Health: h.withDefaults()})
}

// SharedInstance returns the instance for addr with these settings from
// the reload-surviving state: snapshots naming the same backend with the
// same pool settings share one connection pool and one health state, so a
// reload neither drops warm connections nor forgets that an instance was
// refusing. An instance no live snapshot names any more has its idle
// connections closed after the state's grace period; requests still
// running on it finish normally.
func SharedInstance(st *pipeline.StateBuild, addr string, weight int, p Pool, h Health, log *zap.Logger) *Instance {
	return st.Get(instanceKey(addr, weight, p, h), func() (any, func()) {
		in := newInstance(addr, weight, p, h, log)
		return in, in.close
	}).(*Instance)
}

// ServicesKey is the key of the snapshot's services (by name) in the
// build environment, for features that send requests of their own to a
// service (mirroring).
var ServicesKey = pipeline.NewKey[map[string]*Service]("upstream.services")
