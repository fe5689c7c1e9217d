package upstream

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/tollgate/tollgate/discovery"
	"github.com/tollgate/tollgate/pipeline"
	"go.uber.org/zap"
)

// Members are a discovered service's instances: they follow the
// registry's set (discovery.Watch). An address that stays in the set
// keeps its instance, so its pooled connections, health and ejection
// survive every update of the set, and every reload that leaves the
// service's settings alone (Members are reload-surviving state).
type Members struct {
	watch   *discovery.Watch
	source  string // the watch's name, each instance's Source
	service string
	pool    Pool
	health  Health
	log     *zap.Logger

	cur atomic.Pointer[memberList]

	mu     sync.Mutex
	byKey  map[string]*Instance
	closed bool
	cancel func()
	// views are the services (and their splits' selections) over the
	// members, of every snapshot still in use: each gets its balancer
	// rebuilt here, off the request path, at every change. Weak: a
	// snapshot that is dropped takes its services with it.
	views []weak.Pointer[Service]
}

// memberList is one set of instances; a service's balancers are built
// for one list and rebuilt when the members hold another.
type memberList struct {
	instances []*Instance
}

// removedDrain is how long an instance the registry no longer lists keeps
// its idle connections and prober: it gets no new request from the
// moment the set changes, and those in flight finish on it.
const removedDrain = 30 * time.Second

// SharedMembers returns the members that follow w for a service with
// these pool and health settings, from the reload-surviving state.
func SharedMembers(st *pipeline.StateBuild, w *discovery.Watch, service string, p Pool, h Health, log *zap.Logger) *Members {
	key := fmt.Sprintf("upstream.members|%p|%s|%s", w, service, pipeline.Digest(struct {
		Pool   Pool
		Health Health
	}{p.withDefaults(), h.withDefaults()}))
	return st.Get(key, func() (any, func()) {
		m := &Members{watch: w, source: w.String(), service: service, pool: p, health: h, log: log, byKey: map[string]*Instance{}}
		m.cur.Store(&memberList{})
		m.cancel = w.Subscribe(m.apply)
		return m, m.close
	}).(*Members)
}

// apply takes a new set from the watch.
func (m *Members) apply(set discovery.Set) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	next := make(map[string]*Instance, len(set.Instances))
	list := make([]*Instance, 0, len(set.Instances))
	for _, d := range set.Instances {
		k := memberKey(d)
		in := m.byKey[k]
		if in == nil {
			in = newInstance(d.Addr, d.Weight, m.pool, m.health, m.log)
			in.Meta, in.Source = d.Meta, m.source
		}
		next[k] = in
		list = append(list, in)
	}
	for k, in := range m.byKey {
		if next[k] == nil {
			time.AfterFunc(removedDrain, in.close)
		}
	}
	m.byKey = next
	m.cur.Store(&memberList{instances: list})
	live := m.views[:0]
	for _, w := range m.views {
		if s := w.Value(); s != nil {
			s.set.Store(s.balanced(list))
			live = append(live, w)
		}
	}
	clear(m.views[len(live):])
	m.views = live
}

// attach builds s's balancer over the current members and rebuilds it at
// every change from now on.
func (m *Members) attach(s *Service) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s.set.Store(s.balanced(m.cur.Load().instances))
	m.views = append(m.views, weak.Make(s))
}

// memberKey is an instance's identity in the set: a weight or metadata
// change makes a new instance (the balancers and splits read both).
func memberKey(d discovery.Instance) string {
	var b strings.Builder
	b.WriteString(d.Addr)
	b.WriteString("|")
	b.WriteString(strconv.Itoa(d.Weight))
	for _, k := range slices.Sorted(maps.Keys(d.Meta)) {
		b.WriteString("|")
		b.WriteString(k)
		b.WriteString("=")
		b.WriteString(d.Meta[k])
	}
	return b.String()
}

// Watch returns the watch the members follow.
func (m *Members) Watch() *discovery.Watch { return m.watch }

// close stops following the watch and closes every instance.
func (m *Members) close() {
	m.cancel()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	for _, in := range m.byKey {
		in.close()
	}
	m.byKey = nil
}
