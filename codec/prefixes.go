package codec

import (
	"fmt"
	"net/netip"
	"strings"
)

// PrefixList is a set of CIDR prefixes (IPv4 and IPv6). It implements
// Trusted. The zero value contains nothing.
type PrefixList []netip.Prefix

// ParsePrefixes parses CIDRs; a bare address means that one address.
func ParsePrefixes(cidrs []string) (PrefixList, error) {
	var out PrefixList
	for _, s := range cidrs {
		s = strings.TrimSpace(s)
		if !strings.Contains(s, "/") {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("invalid address %q: %w", s, err)
			}
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("invalid CIDR %q: %w", s, err)
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Contains reports whether ip is in any prefix.
func (l PrefixList) Contains(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range l {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
