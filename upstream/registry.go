package upstream

import (
	"strconv"

	"github.com/tollgate/tollgate/pipeline"
	"go.uber.org/zap"
)

func instanceKey(addr string, weight int, p Pool, h Health) string {
	p, h = p.withDefaults(), h.withDefaults()
	return "upstream.instance|" + h.Path + "|" + h.Interval.String() + "|" + h.Timeout.String() + "|" +
		strconv.Itoa(h.EjectAfter) + "|" + strconv.Itoa(h.HealthyAfter) + "|" + addr + "|" + strconv.Itoa(weight) + "|" + p.Connect.String() + "|" + p.Read.String() + "|" +
		p.Write.String() + "|" + p.IdleConn.String() + "|" + strconv.Itoa(p.MaxConns) + "|" +
		p.MaxConnWait.String() + "|" + strconv.Itoa(p.MaxResponseBytes) + "|" + strconv.Itoa(p.AnswerWindow) + "|" + strconv.FormatBool(p.StreamResponse)
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
