package etcd

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/naming/endpoints"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"gopkg.in/yaml.v3"

	"github.com/tollgate/tollgate/discovery"
	"github.com/tollgate/tollgate/internal/testutil"
)

// node parses text into the mapping node the core hands to Decoder.
func node(t *testing.T, text string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Content[0]
}

// newTestProvider builds the provider from its settings text, as the
// core does, with a logger the test can read.
func newTestProvider(t *testing.T, settings string) (*Provider, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	p, err := newProvider(discovery.Decoder(node(t, settings)), discovery.Env{Logger: zap.New(core)})
	if err != nil {
		t.Fatalf("provider: %v", err)
	}
	t.Cleanup(func() { _ = p.(*Provider).Close() })
	return p.(*Provider), logs
}

// recorder keeps what a Watch reported.
type recorder struct {
	mu      sync.Mutex
	sets    [][]discovery.Instance
	fails   []error
	onEvery func([]discovery.Instance) // called inside update, if set
}

func (r *recorder) update(set []discovery.Instance) {
	r.mu.Lock()
	r.sets = append(r.sets, set)
	hook := r.onEvery
	r.mu.Unlock()
	if hook != nil {
		hook(set)
	}
}

func (r *recorder) fail(err error) {
	r.mu.Lock()
	r.fails = append(r.fails, err)
	r.mu.Unlock()
}

func (r *recorder) counts() (updates, fails int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sets), len(r.fails)
}

// last is the last set reported, as "addr" or "addr w=N" items joined
// with spaces, or "(none)" before any.
func (r *recorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sets) == 0 {
		return "(none)"
	}
	return addrs(r.sets[len(r.sets)-1])
}

func (r *recorder) setsSince(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.sets[n:] {
		out = append(out, addrs(s))
	}
	return out
}

func addrs(set []discovery.Instance) string {
	parts := make([]string, 0, len(set))
	for _, in := range set {
		parts = append(parts, in.Addr)
	}
	return strings.Join(parts, " ")
}

// waitFor waits until the last reported set is want.
func (r *recorder) waitFor(t *testing.T, within time.Duration, want string) time.Duration {
	t.Helper()
	start := time.Now()
	for r.last() != want {
		if time.Since(start) > within {
			t.Fatalf("set %q, want %q within %v", r.last(), want, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// watch runs the target's Watch until the test ends.
func watch(t *testing.T, p *Provider, service string, r *recorder) discovery.Target {
	t.Helper()
	tg, err := p.Target(service, discovery.Decoder(node(t, "from: etcd\nname: "+service+"\n")))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tg.Watch(ctx, r.update, r.fail)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Watch did not return after its context ended")
		}
	})
	return tg
}

// registry is the side that registers instances, with etcd's own client
// and its naming/endpoints manager, as a backend does.
type registry struct {
	t      *testing.T
	client *clientv3.Client
}

func newRegistry(t *testing.T, e *testutil.Etcd, tlsCfg *tls.Config) *registry {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints: []string{e.Endpoint}, DialTimeout: 5 * time.Second, TLS: tlsCfg, Logger: zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &registry{t: t, client: c}
}

func (g *registry) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	g.t.Cleanup(cancel)
	return ctx
}

// add registers addr for service with etcd's endpoints manager, under
// the key PREFIX/service/addr, optionally bound to a lease.
func (g *registry) add(service, addr string, meta any, opts ...clientv3.OpOption) {
	g.t.Helper()
	m, err := endpoints.NewManager(g.client, "/services/"+service)
	if err != nil {
		g.t.Fatal(err)
	}
	key := "/services/" + service + "/" + addr
	if err := m.AddEndpoint(g.ctx(), key, endpoints.Endpoint{Addr: addr, Metadata: meta}, opts...); err != nil {
		g.t.Fatalf("AddEndpoint %s: %v", key, err)
	}
}

func (g *registry) remove(service, addr string) {
	g.t.Helper()
	m, err := endpoints.NewManager(g.client, "/services/"+service)
	if err != nil {
		g.t.Fatal(err)
	}
	if err := m.DeleteEndpoint(g.ctx(), "/services/"+service+"/"+addr); err != nil {
		g.t.Fatalf("DeleteEndpoint: %v", err)
	}
}

// put writes a raw value, as a hostile or broken writer would.
func (g *registry) put(key, value string) int64 {
	g.t.Helper()
	resp, err := g.client.Put(g.ctx(), key, value)
	if err != nil {
		g.t.Fatalf("put %s: %v", key, err)
	}
	return resp.Header.Revision
}

// addrList is "127.0.0.1:P1 127.0.0.1:P2 …" for the ports given, sorted
// as the provider sorts. The addresses are only registered, never dialled.
func addrList(ports ...int) string {
	out := make([]string, 0, len(ports))
	for _, p := range ports {
		out = append(out, fmt.Sprintf("127.0.0.1:%d", p))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}
