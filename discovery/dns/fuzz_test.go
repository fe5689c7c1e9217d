package dns

import (
	"math"
	"net/netip"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// FuzzAnswer feeds arbitrary answers to what reads them: accepting the
// answer, walking its CNAMEs, grouping SRV records, finding targets'
// addresses. None of it may panic, and a CNAME walk stays bounded.
func FuzzAnswer(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m dnsmessage.Message
		if m.Unpack(data) != nil || len(m.Questions) != 1 {
			return
		}
		q := m.Questions[0]
		msg, ok := parseAnswer(data, m.ID, q)
		if !ok {
			return
		}
		w := chainWalk{ttl: math.MaxUint32}
		rrs, _, err := w.follow(msg, q.Name.String(), q.Type)
		if w.hops > maxCNAMEHops+1 || (err == nil && w.hops > maxCNAMEHops) {
			t.Fatalf("%d CNAME hops (error %v)", w.hops, err)
		}
		_ = addrsOf(rrs)
		r := resolver{family: family{v4: true, v6: true}}
		set := newInstanceSet()
		for _, group := range byPriority(rrs) {
			for _, srv := range group {
				ips, _, _ := r.fromAdditional(msg.Additionals, srv.Target.String())
				for _, ip := range ips {
					set.add(netip.AddrPortFrom(ip, srv.Port), max(int(srv.Weight), 1), nil)
				}
			}
		}
		_ = set.sorted()
		_ = negativeTTL(msg)
	})
}

// fuzzSeeds are answers of the shapes the resolver meets: SRV with
// addresses in the additional section, and a CNAME chain to A records.
func fuzzSeeds(f *testing.F) [][]byte {
	srvName := dnsmessage.MustNewName("_http._tcp.stock.test.")
	target := dnsmessage.MustNewName("a.test.")
	alias := dnsmessage.MustNewName("www.test.")
	in := dnsmessage.ClassINET
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, Response: true})
	check(f, b.StartQuestions())
	check(f, b.Question(dnsmessage.Question{Name: srvName, Type: dnsmessage.TypeSRV, Class: in}))
	check(f, b.StartAnswers())
	check(f, b.SRVResource(dnsmessage.ResourceHeader{Name: srvName, Class: in, TTL: 5},
		dnsmessage.SRVResource{Priority: 10, Weight: 5, Port: 8080, Target: target}))
	check(f, b.StartAdditionals())
	check(f, b.AResource(dnsmessage.ResourceHeader{Name: target, Class: in, TTL: 5}, dnsmessage.AResource{A: [4]byte{10, 0, 0, 1}}))
	check(f, b.AAAAResource(dnsmessage.ResourceHeader{Name: target, Class: in, TTL: 5}, dnsmessage.AAAAResource{AAAA: [16]byte{0xfd, 15: 1}}))
	srv, err := b.Finish()
	check(f, err)

	b = dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 8, Response: true})
	check(f, b.StartQuestions())
	check(f, b.Question(dnsmessage.Question{Name: alias, Type: dnsmessage.TypeA, Class: in}))
	check(f, b.StartAnswers())
	check(f, b.CNAMEResource(dnsmessage.ResourceHeader{Name: alias, Class: in, TTL: 5}, dnsmessage.CNAMEResource{CNAME: target}))
	check(f, b.CNAMEResource(dnsmessage.ResourceHeader{Name: target, Class: in, TTL: 5}, dnsmessage.CNAMEResource{CNAME: alias}))
	check(f, b.AResource(dnsmessage.ResourceHeader{Name: target, Class: in, TTL: 5}, dnsmessage.AResource{A: [4]byte{10, 0, 0, 2}}))
	cname, err := b.Finish()
	check(f, err)
	return [][]byte{srv, cname}
}

func check(f *testing.F, err error) {
	f.Helper()
	if err != nil {
		f.Fatal(err)
	}
}
