package dns

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/discovery"
)

func TestSettingsDefaultsAndChecks(t *testing.T) {
	t.Parallel()
	tg := mustTarget(t, `{servers: ["10.0.0.2:53", "10.0.0.3", "[fd00::53]:5353"]}`,
		"{from: dns, name: _http._tcp.stock.svc.cluster.local}")
	got := tg.(*target)
	want := []netip.AddrPort{
		netip.MustParseAddrPort("10.0.0.2:53"),
		netip.MustParseAddrPort("10.0.0.3:53"),
		netip.MustParseAddrPort("[fd00::53]:5353"),
	}
	if len(got.clamp.servers) != len(want) {
		t.Fatalf("servers %v, want %v", got.clamp.servers, want)
	}
	for i := range want {
		if got.clamp.servers[i] != want[i] {
			t.Errorf("server %d: %v, want %v", i, got.clamp.servers[i], want[i])
		}
	}
	if got.clamp.minTTL != time.Second || got.clamp.maxTTL != 30*time.Second || got.clamp.timeout != 2*time.Second {
		t.Errorf("defaults: min_ttl %v max_ttl %v timeout %v, want 1s 30s 2s", got.clamp.minTTL, got.clamp.maxTTL, got.clamp.timeout)
	}
	if got.cfg.kind != lookupSRV || got.String() != "dns SRV _http._tcp.stock.svc.cluster.local" {
		t.Errorf("a name starting with _ is %v (%s), want SRV", got.cfg.kind, got)
	}
	a := mustTarget(t, `{servers: ["10.0.0.2:53"]}`, "{from: dns, name: stock.svc, port: 8080}").(*target)
	if a.cfg.kind != lookupAddr || a.cfg.port != 8080 || !a.cfg.family.v4 || !a.cfg.family.v6 {
		t.Errorf("host name: %+v, want type a, port 8080, both families", a.cfg)
	}
}

func TestSettingsErrors(t *testing.T) {
	t.Parallel()
	ok := `{servers: ["127.0.0.1:53"]}`
	for _, tc := range []struct{ provider, discover, want string }{
		{`{servers: ["127.0.0.1:53"], retries: 3}`, "{from: dns, name: a.b, port: 1}", `unknown setting "retries"`},
		{ok, "{from: dns, name: a.b, port: 1, weight: 2}", `unknown setting "weight"`},
		{ok, "{from: dns, name: stock.svc}", "type a needs a port"},
		{ok, "{from: dns, name: stock.svc, type: a, port: 70000}", "type a needs a port"},
		{ok, "{from: dns, name: _http._tcp.stock, port: 80}", "port is not used with type srv"},
		{ok, "{from: dns, name: stock.svc, type: mx}", `type "mx" is not srv or a`},
		{ok, "{from: dns, name: stock.svc, port: 80, family: ipv5}", `family "ipv5"`},
		{ok, "{from: dns, port: 80}", "name is required"},
		{ok, "{from: dns, name: a..b, port: 80}", "empty label"},
		{ok, "{from: dns, name: " + strings.Repeat("x", 64) + ".b, port: 80}", "longer than 63"},
		{`{servers: ["127.0.0.1:53"], min_ttl: 10s, max_ttl: 5s}`, "{from: dns, name: a.b, port: 1}", "min_ttl 10s is above max_ttl 5s"},
		{`{servers: ["127.0.0.1:53"], min_ttl: 10ms}`, "{from: dns, name: a.b, port: 1}", "below 100ms"},
		{`{servers: ["127.0.0.1:53"], min_ttl: soon}`, "{from: dns, name: a.b, port: 1}", "invalid duration"},
		{`{servers: ["dns.example:53"]}`, "{from: dns, name: a.b, port: 1}", "not an IP address with a port"},
		{`{servers: ["127.0.0.1:0"]}`, "{from: dns, name: a.b, port: 1}", "port 0"},
	} {
		_, err := buildTarget(t, tc.provider, tc.discover)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s / %s: error %v, want %q", tc.provider, tc.discover, err, tc.want)
		}
	}
}

func TestSettingsMaxTTLDefaultFollowsALargerMinTTL(t *testing.T) {
	t.Parallel()
	tg := mustTarget(t, `{servers: ["127.0.0.1:53"], min_ttl: 1m}`, "{from: dns, name: a.b, port: 1}").(*target)
	if tg.clamp.minTTL != time.Minute || tg.clamp.maxTTL != time.Minute {
		t.Errorf("min_ttl 1m alone: clamp [%v, %v], want [1m, 1m]", tg.clamp.minTTL, tg.clamp.maxTTL)
	}
}

func TestNameserversOfResolvConf(t *testing.T) {
	t.Parallel()
	got := nameservers(strings.NewReader("# comment\nsearch svc\nnameserver 10.96.0.10\nnameserver fe80::1%eth0\nnameserver bogus\noptions ndots:5\n"))
	if len(got) != 2 || got[0].String() != "10.96.0.10:53" || got[1].String() != "[fe80::1%eth0]:53" {
		t.Errorf("nameservers: %v", got)
	}
}

func TestCheckedForAnotherHostReadsNoResolvConf(t *testing.T) {
	t.Parallel()
	p, err := newProvider(discovery.Decoder(node(t, "{min_ttl: 1s}")), discovery.Env{ForOtherHosts: true})
	if err != nil {
		t.Fatal(err)
	}
	if s := p.(*provider).cfg.servers; len(s) != 0 {
		t.Errorf("servers %v read from this host's resolv.conf for another host", s)
	}
}
