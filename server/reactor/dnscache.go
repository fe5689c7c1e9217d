//go:build linux

package reactor

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"
)

// dnsTTL is how long the loops reuse an upstream host name's addresses,
// as long as fasthttp's dialer does on the other transports
// (upstream/instance.go): a backend named by host (a Kubernetes service,
// say) is otherwise looked up for every new connection to it.
const dnsTTL = time.Minute

// dnsCache holds the addresses host names resolved to, for dnsTTL, and
// hands them out in turn, so new connections spread over every address a
// name has, as fasthttp's dialer does. The loops of a transport share it.
type dnsCache struct {
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)

	mu      sync.Mutex
	entries map[string]*dnsEntry
}

type dnsEntry struct {
	addrs   []netip.Addr
	expires time.Time
	next    int
}

func newDNSCache() *dnsCache {
	return &dnsCache{
		lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		},
		entries: map[string]*dnsEntry{},
	}
}

// cached returns the next address of host while its entry is fresh.
func (d *dnsCache) cached(host string, now time.Time) (netip.Addr, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.entries[host]
	if e == nil || !now.Before(e.expires) {
		return netip.Addr{}, false
	}
	a := e.addrs[e.next%len(e.addrs)]
	e.next++
	return a, true
}

// resolve looks host up (the lookup blocks: the caller runs it off the
// loop) and keeps its addresses: IPv4 ones when it has any, as the
// upstream pools dial them.
func (d *dnsCache) resolve(ctx context.Context, host string, now time.Time) (netip.Addr, error) {
	ips, err := d.lookup(ctx, host)
	if err != nil {
		return netip.Addr{}, err
	}
	var v4, all []netip.Addr
	for _, ip := range ips {
		if ip = ip.Unmap(); ip.Is4() {
			v4 = append(v4, ip)
		}
		all = append(all, ip)
	}
	if len(v4) > 0 {
		all = v4
	}
	if len(all) == 0 {
		return netip.Addr{}, errors.New("no address for " + host)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	e := &dnsEntry{addrs: all, expires: now.Add(dnsTTL)}
	if old := d.entries[host]; old != nil {
		e.next = old.next // keep turning through the addresses
	}
	d.entries[host] = e
	a := e.addrs[e.next%len(e.addrs)]
	e.next++
	return a, nil
}
