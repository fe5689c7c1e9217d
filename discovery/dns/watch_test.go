package dns

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
)

// stockSRV is an SRV set in two priority groups: 10 (a weighted 5, b
// weighted 0 with an IPv4 and an IPv6 address) and the backup 20 (c).
var stockSRV = []string{
	"local=/test/",
	"local-ttl=1",
	"srv-host=_http._tcp.stock.test,a.test,8080,10,5",
	"srv-host=_http._tcp.stock.test,b.test,8081,10,0",
	"srv-host=_http._tcp.stock.test,c.test,9090,20,1",
	"host-record=a.test,10.1.0.1",
	"host-record=b.test,10.1.0.2,fd00::2",
	"host-record=c.test,10.1.0.3",
}

func TestSRVReadsPortsWeightsAndTheLowestPriority(t *testing.T) {
	t.Parallel()
	d := testutil.StartDNSMasq(t, stockSRV...)
	w := startWatch(t, mustTarget(t, servers(d.Addr), "{from: dns, name: _http._tcp.stock.test, type: srv}"))
	set := w.nextUpdate(t, 3*time.Second, false)
	// b's SRV weight 0 is a share of 1; c, at priority 20, is a backup.
	if got, want := addrs(set), "10.1.0.1:8080/5/p10 10.1.0.2:8081/1/p10 [fd00::2]:8081/1/p10"; got != want {
		t.Fatalf("set %q, want %q", got, want)
	}
	if set[0].Meta["target"] != "a.test" {
		t.Errorf("meta %v, want target a.test", set[0].Meta)
	}

	// The priority-10 targets lose their addresses: the backup is served.
	d.SetConfig(without(stockSRV, "host-record=a.test", "host-record=b.test")...)
	if got, want := addrs(w.nextUpdate(t, 3*time.Second, true)), "10.1.0.3:9090/1/p20"; got != want {
		t.Fatalf("with the primary group empty: set %q, want %q", got, want)
	}
	// One primary target back: the backup is dropped again.
	d.SetConfig(without(stockSRV, "host-record=b.test")...)
	if got, want := addrs(w.nextUpdate(t, 3*time.Second, true)), "10.1.0.1:8080/5/p10"; got != want {
		t.Fatalf("with the primary group back: set %q, want %q", got, want)
	}
}

func TestSRVTargetsMissingFromTheAdditionalSectionAreAsked(t *testing.T) {
	t.Parallel()
	// The target's address comes through a CNAME, which dnsmasq does not
	// put in the additional section: the client asks for it.
	d := testutil.StartDNSMasq(t, "local=/test/", "local-ttl=1",
		"srv-host=_grpc._tcp.orders.test,orders-alias.test,50051,0,0",
		"cname=orders-alias.test,orders.test",
		"host-record=orders.test,10.3.0.1")
	w := startWatch(t, mustTarget(t, servers(d.Addr), "{from: dns, name: _grpc._tcp.orders.test}"))
	if got, want := addrs(w.nextUpdate(t, 3*time.Second, false)), "10.3.0.1:50051/1/p0"; got != want {
		t.Fatalf("set %q, want %q", got, want)
	}
}

func TestAddressRecordsWithAPort(t *testing.T) {
	t.Parallel()
	d := testutil.StartDNSMasq(t, "local=/test/", "local-ttl=1",
		"host-record=stock.test,10.2.0.1,fd00::1",
		"host-record=stock.test,10.2.0.2",
		"cname=www.test,stock.test")
	both := startWatch(t, mustTarget(t, servers(d.Addr), "{from: dns, name: stock.test, type: a, port: 8443}"))
	if got, want := addrs(both.nextUpdate(t, 3*time.Second, false)), "10.2.0.1:8443/1 10.2.0.2:8443/1 [fd00::1]:8443/1"; got != want {
		t.Fatalf("A and AAAA: set %q, want %q", got, want)
	}
	v4 := startWatch(t, mustTarget(t, servers(d.Addr), "{from: dns, name: www.test, port: 80, family: ipv4}"))
	if got, want := addrs(v4.nextUpdate(t, 3*time.Second, false)), "10.2.0.1:80/1 10.2.0.2:80/1"; got != want {
		t.Fatalf("ipv4 through a CNAME: set %q, want %q", got, want)
	}
}

func TestAChangedSetIsReportedWithinMaxTTL(t *testing.T) {
	t.Parallel()
	// A TTL of an hour, clamped to max_ttl 1s.
	d := testutil.StartDNSMasq(t, "local=/test/", "local-ttl=3600", "host-record=stock.test,10.2.0.1")
	w := startWatch(t, mustTarget(t, servers(d.Addr), "{from: dns, name: stock.test, port: 80, family: ipv4}"))
	if got := addrs(w.nextUpdate(t, 3*time.Second, false)); got != "10.2.0.1:80/1" {
		t.Fatalf("first set %q", got)
	}
	// The same answer again is not reported again.
	time.Sleep(1500 * time.Millisecond)
	if n, _ := w.counts(); n != 1 {
		t.Fatalf("%d updates for an unchanged set, want 1", n)
	}
	d.SetConfig("local=/test/", "local-ttl=3600", "host-record=stock.test,10.2.0.2", "host-record=stock.test,10.2.0.3")
	changed := time.Now()
	if got, want := addrs(w.nextUpdate(t, 3*time.Second, true)), "10.2.0.2:80/1 10.2.0.3:80/1"; got != want {
		t.Fatalf("set after the change %q, want %q", got, want)
	}
	if took := time.Since(changed); took > 1500*time.Millisecond {
		t.Errorf("change seen after %v, want within max_ttl 1s", took)
	}
}

func TestTheRecordsTTLDecidesWhenToAskAgain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, ttl, clamp string
		lo, hi           int // A queries expected in 3s
	}{
		// TTL 1s, inside [200ms, 10s]: about 3 queries, not 15.
		{"ttl", "local-ttl=1", "min_ttl: 200ms, max_ttl: 10s", 2, 5},
		// TTL 0 clamped to min_ttl 500ms: about 6, not a loop.
		{"min_ttl", "local-ttl=0", "min_ttl: 500ms, max_ttl: 10s", 4, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := testutil.StartDNSMasq(t, "local=/test/", tc.ttl, "host-record=stock.test,10.2.0.1")
			provider := "{servers: [" + d.Addr + "], timeout: 300ms, " + tc.clamp + "}"
			w := startWatch(t, mustTarget(t, provider, "{from: dns, name: stock.test, port: 80, family: ipv4}"))
			w.nextUpdate(t, 3*time.Second, false)
			before := d.Queries("A", "stock.test")
			time.Sleep(3 * time.Second)
			n := d.Queries("A", "stock.test") - before
			t.Logf("%d A queries in 3s", n)
			if n < tc.lo || n > tc.hi {
				t.Errorf("%d queries in 3s with %s and %s, want %d to %d", n, tc.ttl, tc.clamp, tc.lo, tc.hi)
			}
		})
	}
}

// without returns lines minus those starting with one of prefixes.
func without(lines []string, prefixes ...string) []string {
	var out []string
next:
	for _, l := range lines {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}

// deadAddr is a loopback UDP port nothing listens on: queries to it are
// refused at once.
func deadAddr(t *testing.T) string {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := pc.LocalAddr().(*net.UDPAddr).Port
	pc.Close()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

func TestATruncatedAnswerIsAskedAgainOverTCP(t *testing.T) {
	t.Parallel()
	// 100 A records do not fit the 512 bytes this server allows over UDP.
	lines := []string{"local=/test/", "local-ttl=1", "edns-packet-max=512"}
	for i := range 100 {
		lines = append(lines, "host-record=big.test,10.4.0."+strconv.Itoa(i+1))
	}
	d := testutil.StartDNSMasq(t, lines...)
	w := startWatch(t, mustTarget(t, servers(d.Addr), "{from: dns, name: big.test, port: 80, family: ipv4}"))
	if set := w.nextUpdate(t, 3*time.Second, false); len(set) != 100 {
		t.Fatalf("%d instances, want 100: %s", len(set), d.Log())
	}
}

func TestAnSRVAnswerCannotCauseUnboundedLookups(t *testing.T) {
	t.Parallel()
	// 70 targets, none with an address: each would need queries of its own.
	lines := []string{"local=/test/", "local-ttl=1"}
	for i := range 70 {
		lines = append(lines, "srv-host=_http._tcp.many.test,t"+strconv.Itoa(i)+".test,80,0,1")
	}
	d := testutil.StartDNSMasq(t, lines...)
	w := startWatch(t, mustTarget(t, servers(d.Addr), "{from: dns, name: _http._tcp.many.test, family: ipv4}"))
	if err := w.nextFail(t, 5*time.Second); !strings.Contains(err.Error(), "more than 64 targets without addresses") {
		t.Errorf("failure %q", err)
	}
}
