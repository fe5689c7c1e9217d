//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
)

// srvRecords are dnsmasq lines giving _http._tcp.stock.test one SRV
// record per upstream (priority 10, weight 1), each target 127.0.0.1.
func srvRecords(t *testing.T, ups ...*testutil.Upstream) []string {
	lines := []string{"local=/test/", "local-ttl=1", "auth-ttl=1"}
	for i, u := range ups {
		_, port, err := net.SplitHostPort(u.Addr)
		if err != nil {
			t.Fatal(err)
		}
		target := fmt.Sprintf("t%d.test", i)
		lines = append(lines, fmt.Sprintf("srv-host=_http._tcp.stock.test,%s,%s,10,1", target, port),
			"host-record="+target+",127.0.0.1")
	}
	return lines
}

const dnsDiscovered = `
watch: false
discovery:
  cache_dir: %s
  dns: {servers: ["%s"], min_ttl: 200ms, max_ttl: 1s, timeout: 300ms}
services:
  stock:
    discover: {from: dns, name: _http._tcp.stock.test, type: srv}
    timeouts: {connect: 300ms, read: 1s, total: 2s}
routes:
  - {name: stock, match: {prefix: /}, service: stock}
`

// TestDiscoveryFromDNS runs a gateway process on SRV records served by a
// real dnsmasq, under steady traffic: a new record is served within 5 s,
// a removed one gets nothing 5 s later, the DNS server frozen or stopped
// costs no request, and a node started while it is down serves the set
// its predecessor saved.
func TestDiscoveryFromDNS(t *testing.T) {
	t.Parallel() // it mostly waits (for traffic, a registry, processes): beside the others
	a, b, c := testutil.StartQuietUpstream(t, "a"), testutil.StartQuietUpstream(t, "b"), testutil.StartQuietUpstream(t, "c")
	dns := testutil.StartDNSMasq(t, srvRecords(t, a, b)...)
	saved := t.TempDir()
	cfg := writeConfig(t, fmt.Sprintf(dnsDiscovered, saved, dns.Addr))
	addr := freePort(t)
	startProc(t, addr, "off", nil, "run", "-c", cfg)
	l := startLoad(addr, "/stock", 4)
	defer l.finish()
	testutil.Eventually(t, 5*time.Second, "a and b served", func() bool { return a.Requests.Load() > 0 && b.Requests.Load() > 0 })

	// b's record is replaced by c's.
	dns.SetConfig(srvRecords(t, a, c)...)
	took := testutil.Eventually(t, 5*time.Second, "c served", func() bool { return c.Requests.Load() > 0 })
	t.Logf("a new SRV record served after %v", took)
	time.Sleep(5 * time.Second)
	bAt := b.Requests.Load()
	time.Sleep(time.Second)
	if more := b.Requests.Load() - bAt; more != 0 {
		t.Fatalf("b got %d requests more than 5 s after its record went", more)
	}

	// The DNS server frozen, then stopped: the last set keeps serving.
	failedBefore, okBefore := l.non2xx.Load()+l.errs.Load(), l.ok.Load()
	dns.Freeze()
	time.Sleep(3 * time.Second)
	dns.Thaw()
	dns.Kill()
	time.Sleep(3 * time.Second)
	if failed := l.non2xx.Load() + l.errs.Load() - failedBefore; failed != 0 || l.ok.Load() == okBefore {
		t.Fatalf("while DNS was frozen and down: %d failed requests (%s)", failed, l.summary())
	}

	// A node started while DNS is down serves the saved set, a and c.
	aAt, cAt := a.Requests.Load(), c.Requests.Load()
	addr2 := freePort(t)
	startProc(t, addr2, "off", nil, "run", "-c", cfg)
	for range 20 {
		if status, _ := testutil.Get(t, "http://"+addr2+"/stock"); status != 200 {
			t.Fatalf("the node started during the outage answered %d", status)
		}
	}
	if a.Requests.Load() == aAt || c.Requests.Load() == cAt {
		t.Fatal("the node started during the outage did not serve the saved set")
	}
	if l.non2xx.Load()+l.errs.Load() != 0 {
		t.Fatalf("requests failed along the way: %s", l.summary())
	}
}
