//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/naming/endpoints"
)

// etcdRegistry registers instances the way services do: etcd's own
// endpoints manager, under /services/NAME/ADDR.
type etcdRegistry struct {
	t      *testing.T
	client *clientv3.Client
}

func newEtcdRegistry(t *testing.T, endpoint string) *etcdRegistry {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &etcdRegistry{t: t, client: c}
}

func (r *etcdRegistry) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	r.t.Cleanup(cancel)
	return ctx
}

func (r *etcdRegistry) add(service, addr string, meta map[string]any, opts ...clientv3.OpOption) {
	r.t.Helper()
	m, err := endpoints.NewManager(r.client, "/services/"+service)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := m.AddEndpoint(r.ctx(), "/services/"+service+"/"+addr, endpoints.Endpoint{Addr: addr, Metadata: meta}, opts...); err != nil {
		r.t.Fatal(err)
	}
}

func (r *etcdRegistry) remove(service, addr string) {
	r.t.Helper()
	m, err := endpoints.NewManager(r.client, "/services/"+service)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := m.DeleteEndpoint(r.ctx(), "/services/"+service+"/"+addr); err != nil {
		r.t.Fatal(err)
	}
}

// forced sends a request forced to the canary share and returns the
// upstream's name.
func forced(t *testing.T, addr string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/split", nil)
	req.Header.Set("X-Canary", "orders@version=v2")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = fmt.Fprint(&b, resp.StatusCode, " ")
	buf := make([]byte, 64)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	return b.String()
}

const etcdDiscovered = `
watch: false
discovery:
  cache_dir: %s
  etcd: {endpoints: ["%s"], timeout: 1s}
services:
  orders:
    discover: {from: etcd, name: orders}
    timeouts: {connect: 300ms, read: 1s, total: 2s}
routes:
  - name: split
    match: {prefix: /split}
    split:
      - {service: orders, metadata: {version: v1}, percent: 90}
      - {service: orders, metadata: {version: v2}}
    split_force: {header: X-Canary}
  - name: orders
    match: {prefix: /}
    service: orders
`

// TestDiscoveryFromEtcd runs a gateway process on instances registered in
// a real etcd, under steady traffic: registrations and deregistrations
// reach it within seconds, an expired lease removes its instance, etcd
// frozen or stopped costs no request, a canary split by metadata follows a
// re-registration, and a node started while etcd is down serves the set
// it saved.
func TestDiscoveryFromEtcd(t *testing.T) {
	t.Parallel() // it mostly waits (for traffic, a registry, processes): beside the others
	etcd := testutil.StartEtcd(t)
	reg := newEtcdRegistry(t, etcd.Endpoint)
	a, b, c := testutil.StartQuietUpstream(t, "a"), testutil.StartQuietUpstream(t, "b"), testutil.StartQuietUpstream(t, "c")
	reg.add("orders", a.Addr, map[string]any{"version": "v1"})
	reg.add("orders", b.Addr, map[string]any{"version": "v2"})

	saved := t.TempDir()
	cfg := writeConfig(t, fmt.Sprintf(etcdDiscovered, saved, etcd.Endpoint))
	addr := freePort(t)
	startProc(t, addr, "off", nil, "run", "-c", cfg)
	l := startLoad(addr, "/orders", 4)
	defer l.finish()
	testutil.Eventually(t, 5*time.Second, "a and b served", func() bool { return a.Requests.Load() > 0 && b.Requests.Load() > 0 })
	if got := forced(t, addr); got != "200 b" {
		t.Fatalf("forced to the canary: %s", got)
	}

	// The canary is re-registered on c: c gets requests within 5 s, the
	// canary share follows it, and b gets no new request 5 s later.
	reg.add("orders", c.Addr, map[string]any{"version": "v2"})
	reg.remove("orders", b.Addr)
	took := testutil.Eventually(t, 5*time.Second, "c served", func() bool { return c.Requests.Load() > 0 })
	t.Logf("a registered instance served after %v", took)
	testutil.Eventually(t, 5*time.Second, "the canary share on c", func() bool { return forced(t, addr) == "200 c" })
	time.Sleep(5 * time.Second)
	bAt := b.Requests.Load()
	time.Sleep(time.Second)
	if more := b.Requests.Load() - bAt; more != 0 {
		t.Fatalf("b got %d requests more than 5 s after it was deregistered", more)
	}

	// An instance whose lease expires (it died and stopped renewing it)
	// leaves the service.
	d := testutil.StartQuietUpstream(t, "d")
	lease, err := reg.client.Grant(reg.ctx(), 2)
	if err != nil {
		t.Fatal(err)
	}
	reg.add("orders", d.Addr, map[string]any{"version": "v1"}, clientv3.WithLease(lease.ID))
	testutil.Eventually(t, 5*time.Second, "d served", func() bool { return d.Requests.Load() > 0 })
	testutil.Eventually(t, 10*time.Second, "d gone with its lease", func() bool {
		at := d.Requests.Load()
		time.Sleep(500 * time.Millisecond)
		return d.Requests.Load() == at
	})

	// etcd frozen, then stopped: the last set keeps serving, no request
	// fails.
	failedBefore := l.non2xx.Load() + l.errs.Load()
	okBefore := l.ok.Load()
	etcd.Freeze()
	time.Sleep(4 * time.Second)
	etcd.Thaw()
	etcd.Kill()
	time.Sleep(3 * time.Second)
	if failed := l.non2xx.Load() + l.errs.Load() - failedBefore; failed != 0 || l.ok.Load() == okBefore {
		t.Fatalf("while etcd was frozen and down: %d failed requests (%s)", failed, l.summary())
	}
	t.Logf("etcd frozen 4 s and down 3 s: %d requests served, none failed", l.ok.Load()-okBefore)

	// A second node started while etcd is down serves the set the first
	// saved: a and c.
	aAt, cAt := a.Requests.Load(), c.Requests.Load()
	addr2 := freePort(t)
	startProc(t, addr2, "off", nil, "run", "-c", cfg)
	for range 20 {
		if status, _ := testutil.Get(t, "http://"+addr2+"/orders"); status != 200 {
			t.Fatalf("the node started during the outage answered %d", status)
		}
	}
	if a.Requests.Load() == aAt || c.Requests.Load() == cAt {
		t.Fatal("the node started during the outage did not serve the saved set")
	}
	etcd.Restart()
	if l.non2xx.Load()+l.errs.Load() != 0 {
		t.Fatalf("requests failed along the way: %s", l.summary())
	}
}
