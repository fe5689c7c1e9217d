package upstream

import (
	"strconv"
	"sync"
)

// Registry hands out Instances so that snapshots naming the same backend
// with the same pool settings share one connection pool and one health
// state: a reload neither drops warm connections nor forgets that an
// instance was refusing. It is safe for concurrent use.
type Registry struct {
	mu        sync.Mutex
	instances map[string]*Instance
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{instances: map[string]*Instance{}} }

func registryKey(addr string, weight int, p Pool) string {
	p = p.withDefaults()
	return addr + "|" + strconv.Itoa(weight) + "|" + p.Connect.String() + "|" + p.Read.String() + "|" +
		p.Write.String() + "|" + p.IdleConn.String() + "|" + strconv.Itoa(p.MaxConns) + "|" +
		p.MaxConnWait.String() + "|" + strconv.Itoa(p.MaxResponseBytes) + "|" + strconv.FormatBool(p.StreamResponse)
}

// Instance returns the shared instance for addr with these settings,
// creating it on first use.
func (r *Registry) Instance(addr string, weight int, p Pool) *Instance {
	k := registryKey(addr, weight, p)
	r.mu.Lock()
	defer r.mu.Unlock()
	if in, ok := r.instances[k]; ok {
		return in
	}
	in := newInstance(addr, weight, p)
	r.instances[k] = in
	return in
}

// Retain forgets every instance not in keep and closes its idle
// connections. Requests still running on an old snapshot finish normally:
// the instance stays usable, it is only no longer handed out.
func (r *Registry) Retain(keep map[*Instance]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, in := range r.instances {
		if !keep[in] {
			delete(r.instances, k)
			in.close()
		}
	}
}
