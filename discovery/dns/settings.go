package dns

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/tollgate/tollgate/pipeline"
)

// Settings is the `discovery.dns` section.
type Settings struct {
	// Servers are the name servers asked, in turn, as host:port with an
	// IP host (a bare IP means port 53). Empty: the nameservers of
	// /etc/resolv.conf.
	Servers []string `yaml:"servers"`
	// MinTTL and MaxTTL clamp the records' TTL, which decides when a set
	// is asked again: a TTL of 0 must not turn into a query loop, nor a
	// TTL of a day into a set that never changes.
	MinTTL pipeline.Duration `yaml:"min_ttl"`
	MaxTTL pipeline.Duration `yaml:"max_ttl"`
	// Timeout bounds one query to one server; the next server is asked
	// after it.
	Timeout pipeline.Duration `yaml:"timeout"`
}

const (
	defaultMinTTL  = time.Second
	defaultMaxTTL  = 30 * time.Second
	defaultTimeout = 2 * time.Second
	// floorTTL keeps a misconfigured min_ttl from making every target
	// query its servers in a tight loop.
	floorTTL = 100 * time.Millisecond
	// resolvConf is where the system's name servers are read when none
	// are given.
	resolvConf = "/etc/resolv.conf"
	// maxResolvConf bounds how much of resolv.conf is read.
	maxResolvConf = 64 << 10
)

// config is Settings checked and with defaults applied.
type config struct {
	servers []netip.AddrPort
	minTTL  time.Duration
	maxTTL  time.Duration
	timeout time.Duration
}

// check validates s and applies defaults. readSystem is false when the
// file is checked for another host: resolv.conf is then not read, and an
// empty server list is left for that host to fill.
func (s Settings) check(readSystem bool) (config, error) {
	c := config{minTTL: s.MinTTL.D(), maxTTL: s.MaxTTL.D(), timeout: s.Timeout.D()}
	if c.minTTL == 0 {
		c.minTTL = defaultMinTTL
	}
	if c.maxTTL == 0 {
		c.maxTTL = max(defaultMaxTTL, c.minTTL)
	}
	if c.timeout == 0 {
		c.timeout = defaultTimeout
	}
	if c.minTTL < floorTTL {
		return c, fmt.Errorf("discovery.dns: min_ttl %v is below %v", c.minTTL, floorTTL)
	}
	if c.minTTL > c.maxTTL {
		return c, fmt.Errorf("discovery.dns: min_ttl %v is above max_ttl %v", c.minTTL, c.maxTTL)
	}
	for _, s := range s.Servers {
		ap, err := parseServer(s)
		if err != nil {
			return c, fmt.Errorf("discovery.dns: servers: %w", err)
		}
		c.servers = append(c.servers, ap)
	}
	if len(c.servers) == 0 && readSystem {
		f, err := os.Open(resolvConf)
		if err != nil {
			return c, fmt.Errorf("discovery.dns: no servers given and %s cannot be read: %w", resolvConf, err)
		}
		defer f.Close()
		c.servers = nameservers(io.LimitReader(f, maxResolvConf))
		if len(c.servers) == 0 {
			return c, fmt.Errorf("discovery.dns: no servers given and %s names none", resolvConf)
		}
	}
	return c, nil
}

// parseServer reads "ip:port", "[ipv6]:port" or a bare IP (port 53).
// A host name is refused: the servers are what resolves names, and
// resolving them through another resolver would hide which one answers.
func parseServer(s string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		if ap.Port() == 0 {
			return ap, fmt.Errorf("%q: port 0", s)
		}
		return ap, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a, 53), nil
	}
	return netip.AddrPort{}, fmt.Errorf("%q is not an IP address with a port, such as \"10.0.0.2:53\"", s)
}

// nameservers returns the "nameserver" lines of a resolv.conf, port 53;
// lines it cannot read are skipped, as the C library does.
func nameservers(r io.Reader) []netip.AddrPort {
	var out []netip.AddrPort
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "nameserver" {
			continue
		}
		if a, err := netip.ParseAddr(fields[1]); err == nil {
			out = append(out, netip.AddrPortFrom(a, 53))
		}
	}
	return out
}

// TargetSettings is a service's `discover` mapping when from is dns.
type TargetSettings struct {
	From string `yaml:"from"`
	// Name is the name asked: an SRV name (_http._tcp.stock.svc.cluster.local)
	// or a host name (stock.svc.cluster.local).
	Name string `yaml:"name"`
	// Type is srv, or a (A and AAAA records with Port). Default: srv
	// when Name starts with "_", else a.
	Type string `yaml:"type"`
	// Port is the instances' port for type a; SRV records carry their own.
	Port int `yaml:"port"`
	// Family keeps only IPv4 or IPv6 addresses (ipv4, ipv6; default
	// both), for a gateway that cannot reach the other family.
	Family string `yaml:"family"`
}

// lookupKind is what a target asks.
type lookupKind int

const (
	lookupSRV lookupKind = iota
	lookupAddr
)

// family selects the address records asked.
type family struct{ v4, v6 bool }

// targetConfig is TargetSettings checked.
type targetConfig struct {
	name   string // absolute, with the final dot
	kind   lookupKind
	port   uint16
	family family
}

func (s TargetSettings) check() (targetConfig, error) {
	var c targetConfig
	name := strings.TrimSpace(s.Name)
	if name == "" {
		return c, errors.New("name is required (an SRV name such as _http._tcp.stock.svc.cluster.local, or a host name)")
	}
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	if err := checkName(name); err != nil {
		return c, fmt.Errorf("name %q: %w", s.Name, err)
	}
	c.name = name
	typ := strings.ToLower(s.Type)
	if typ == "" {
		typ = "a"
		if strings.HasPrefix(name, "_") {
			typ = "srv"
		}
	}
	switch typ {
	case "srv":
		c.kind = lookupSRV
		if s.Port != 0 {
			return c, errors.New("port is not used with type srv (the SRV records carry the ports)")
		}
	case "a":
		c.kind = lookupAddr
		if s.Port < 1 || s.Port > 65535 {
			return c, fmt.Errorf("type a needs a port between 1 and 65535 (got %d)", s.Port)
		}
		c.port = uint16(s.Port)
	default:
		return c, fmt.Errorf("type %q is not srv or a", s.Type)
	}
	switch strings.ToLower(s.Family) {
	case "", "both":
		c.family = family{v4: true, v6: true}
	case "ipv4":
		c.family = family{v4: true}
	case "ipv6":
		c.family = family{v6: true}
	default:
		return c, fmt.Errorf("family %q is not ipv4, ipv6 or both", s.Family)
	}
	return c, nil
}

// checkName refuses what no DNS message can carry, so that a bad name is
// a configuration error and not a failure at every query.
func checkName(name string) error {
	if len(name) > 254 {
		return errors.New("longer than 253 characters")
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(name, "."), ".") {
		if label == "" {
			return errors.New("has an empty label")
		}
		if len(label) > 63 {
			return fmt.Errorf("label %q is longer than 63 characters", label)
		}
	}
	return nil
}
