package dns

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/tollgate/tollgate/discovery"
)

const (
	// maxCNAMEHops bounds a CNAME chain, in one answer and across the
	// further queries it leads to, so that a loop ends.
	maxCNAMEHops = 8
	// maxTargetLookups bounds the further A/AAAA queries one SRV answer
	// may cause for targets the additional section left out.
	maxTargetLookups = 64
)

// records is what one name's lookup found.
type records struct {
	// owner is the name the records belong to, after CNAMEs.
	owner string
	rrs   []dnsmessage.Resource
	// extra is the answer's additional section (SRV targets' addresses).
	extra []dnsmessage.Resource
	// ttl is the smallest TTL of the records and CNAMEs used; for an
	// empty answer, the zone's negative TTL, or 0 when it gives none.
	ttl uint32
}

// resolver turns a target's name into instances.
type resolver struct {
	client *client
	family family
}

// lookup asks name's records of type typ and follows the CNAMEs it meets,
// within the answer and, when the server left the chain unresolved, with
// further queries. NXDOMAIN and an answer without records are answers:
// they return no records, not an error.
func (r *resolver) lookup(ctx context.Context, name string, typ dnsmessage.Type) (records, error) {
	w := chainWalk{ttl: math.MaxUint32}
	for {
		msg, err := r.client.query(ctx, name, typ)
		if err != nil {
			return records{}, err
		}
		rrs, end, err := w.follow(msg, name, typ)
		if err != nil {
			return records{}, fmt.Errorf("%s %s: %w", typeName(typ), strings.TrimSuffix(name, "."), err)
		}
		if len(rrs) > 0 {
			return records{owner: end, rrs: rrs, extra: msg.Additionals, ttl: w.ttl}, nil
		}
		if end == name || msg.RCode != dnsmessage.RCodeSuccess {
			return records{owner: end, ttl: min(w.ttl, negativeTTL(msg))}, nil
		}
		// The chain leads out of what this answer covers: ask its end.
		name = end
	}
}

// chainWalk follows a CNAME chain through one or more answers.
type chainWalk struct {
	hops int
	ttl  uint32 // the smallest TTL of the CNAMEs and records met
}

// follow returns the records of type typ that name leads to in msg's
// answer section, and the name the chain ends at; no records and an end
// other than name mean the answer stops short of the chain's end.
func (w *chainWalk) follow(msg *dnsmessage.Message, name string, typ dnsmessage.Type) ([]dnsmessage.Resource, string, error) {
	cur := name
	for {
		if rrs := ownedBy(msg.Answers, cur, typ); len(rrs) > 0 {
			for _, rr := range rrs {
				w.ttl = min(w.ttl, rr.Header.TTL)
			}
			return rrs, cur, nil
		}
		cnames := ownedBy(msg.Answers, cur, dnsmessage.TypeCNAME)
		if len(cnames) == 0 {
			return nil, cur, nil
		}
		cname, ok := cnames[0].Body.(*dnsmessage.CNAMEResource)
		if !ok {
			return nil, cur, nil
		}
		if w.hops++; w.hops > maxCNAMEHops {
			return nil, cur, fmt.Errorf("more than %d CNAMEs", maxCNAMEHops)
		}
		w.ttl = min(w.ttl, cnames[0].Header.TTL)
		cur = cname.CNAME.String()
	}
}

// ownedBy returns the records of type typ, class IN, owned by name.
func ownedBy(rrs []dnsmessage.Resource, name string, typ dnsmessage.Type) []dnsmessage.Resource {
	var out []dnsmessage.Resource
	for _, rr := range rrs {
		h := rr.Header
		if h.Type == typ && h.Class == dnsmessage.ClassINET && strings.EqualFold(h.Name.String(), name) {
			out = append(out, rr)
		}
	}
	return out
}

// negativeTTL is how long an empty answer holds (RFC 2308): the SOA's
// TTL, at most its minimum field; 0 without an SOA.
func negativeTTL(msg *dnsmessage.Message) uint32 {
	for _, rr := range msg.Authorities {
		if soa, ok := rr.Body.(*dnsmessage.SOAResource); ok {
			return min(rr.Header.TTL, soa.MinTTL)
		}
	}
	return 0
}

// addrs returns name's addresses of the asked families and their TTL.
func (r *resolver) addrs(ctx context.Context, name string) ([]netip.Addr, uint32, error) {
	var out []netip.Addr
	ttl := uint32(math.MaxUint32)
	for _, typ := range r.addrTypes() {
		recs, err := r.lookup(ctx, name, typ)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, addrsOf(recs.rrs)...)
		ttl = min(ttl, recs.ttl)
	}
	return out, ttl, nil
}

func (r *resolver) addrTypes() []dnsmessage.Type {
	var out []dnsmessage.Type
	if r.family.v4 {
		out = append(out, dnsmessage.TypeA)
	}
	if r.family.v6 {
		out = append(out, dnsmessage.TypeAAAA)
	}
	return out
}

// addrsOf returns the addresses of A and AAAA records.
func addrsOf(rrs []dnsmessage.Resource) []netip.Addr {
	var out []netip.Addr
	for _, rr := range rrs {
		switch b := rr.Body.(type) {
		case *dnsmessage.AResource:
			out = append(out, netip.AddrFrom4(b.A))
		case *dnsmessage.AAAAResource:
			out = append(out, netip.AddrFrom16(b.AAAA))
		}
	}
	return out
}

// resolveAddr is type a: name's addresses, each with the target's port.
func (r *resolver) resolveAddr(ctx context.Context, name string, port uint16) ([]discovery.Instance, uint32, error) {
	ips, ttl, err := r.addrs(ctx, name)
	if err != nil {
		return nil, 0, err
	}
	set := newInstanceSet()
	for _, ip := range ips {
		set.add(netip.AddrPortFrom(ip, port), 1, nil)
	}
	return set.sorted(), ttl, nil
}

// resolveSRV is type srv: the SRV records of the lowest priority that has
// at least one reachable address; a group with a higher number is a
// backup, served only when every group before it has none.
func (r *resolver) resolveSRV(ctx context.Context, name string) ([]discovery.Instance, uint32, error) {
	recs, err := r.lookup(ctx, name, dnsmessage.TypeSRV)
	if err != nil {
		return nil, 0, err
	}
	ttl := recs.ttl
	lookups := 0
	for _, group := range byPriority(recs.rrs) {
		set := newInstanceSet()
		for _, srv := range group {
			target := srv.Target.String()
			if target == "." {
				continue // "decidedly not available here" (RFC 2782)
			}
			ips, ipTTL, found := r.fromAdditional(recs.extra, target)
			if !found {
				if lookups++; lookups > maxTargetLookups {
					return nil, 0, fmt.Errorf("SRV %s: more than %d targets without addresses in the answer", strings.TrimSuffix(name, "."), maxTargetLookups)
				}
				if ips, ipTTL, err = r.addrs(ctx, target); err != nil {
					return nil, 0, err
				}
			}
			ttl = min(ttl, ipTTL)
			meta := map[string]string{"priority": strconv.Itoa(int(srv.Priority)), "target": strings.TrimSuffix(target, ".")}
			for _, ip := range ips {
				// SRV weight 0 means "rarely, when others exist"; a
				// balancer share cannot be rarer than 1, so it is 1.
				set.add(netip.AddrPortFrom(ip, srv.Port), max(int(srv.Weight), 1), meta)
			}
		}
		if set.len() > 0 {
			return set.sorted(), ttl, nil
		}
	}
	return nil, ttl, nil
}

// fromAdditional returns target's addresses from an answer's additional
// section; found is false when the section has none of the asked
// families, and they must be asked.
func (r *resolver) fromAdditional(extra []dnsmessage.Resource, target string) (ips []netip.Addr, ttl uint32, found bool) {
	ttl = math.MaxUint32
	for _, typ := range r.addrTypes() {
		rrs := ownedBy(extra, target, typ)
		for _, rr := range rrs {
			ttl = min(ttl, rr.Header.TTL)
		}
		ips = append(ips, addrsOf(rrs)...)
	}
	return ips, ttl, len(ips) > 0
}

// byPriority groups SRV records, lowest priority number first.
func byPriority(rrs []dnsmessage.Resource) [][]*dnsmessage.SRVResource {
	groups := map[uint16][]*dnsmessage.SRVResource{}
	for _, rr := range rrs {
		if srv, ok := rr.Body.(*dnsmessage.SRVResource); ok {
			groups[srv.Priority] = append(groups[srv.Priority], srv)
		}
	}
	prios := make([]int, 0, len(groups))
	for p := range groups {
		prios = append(prios, int(p))
	}
	sort.Ints(prios)
	out := make([][]*dnsmessage.SRVResource, 0, len(prios))
	for _, p := range prios {
		out = append(out, groups[uint16(p)])
	}
	return out
}

// instanceSet collects instances by address: two records that lead to
// the same address and port are one instance with their weights summed.
type instanceSet struct {
	byAddr map[netip.AddrPort]*discovery.Instance
}

func newInstanceSet() *instanceSet {
	return &instanceSet{byAddr: map[netip.AddrPort]*discovery.Instance{}}
}

func (s *instanceSet) len() int { return len(s.byAddr) }

func (s *instanceSet) add(ap netip.AddrPort, weight int, meta map[string]string) {
	if in, ok := s.byAddr[ap]; ok {
		in.Weight += weight
		return
	}
	in := &discovery.Instance{Addr: ap.String(), Weight: weight}
	if meta != nil {
		in.Meta = make(map[string]string, len(meta))
		for k, v := range meta {
			in.Meta[k] = v
		}
	}
	s.byAddr[ap] = in
}

// sorted returns the instances ordered by Addr, so that the same set
// always compares equal.
func (s *instanceSet) sorted() []discovery.Instance {
	out := make([]discovery.Instance, 0, len(s.byAddr))
	for _, in := range s.byAddr {
		out = append(out, *in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out
}
