package codec

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/ascii"
	"github.com/valyala/fasthttp"
)

// collectTwoPass is CollectFields with every Connection option read
// before any field is judged: the pass its one-pass reading must equal.
func collectTwoPass(l *FieldList, h *fasthttp.RequestHeader, o *Outgoing) {
	l.Reset()
	for k, v := range Fields(h) {
		if ascii.EqualFold(k, "Connection") {
			l.addConnOptions(v)
		}
	}
	collectFields(l, h, o, true)
}

func listString(l *FieldList) string {
	var b strings.Builder
	for i := range l.Len() {
		k, v := l.Field(i)
		fmt.Fprintf(&b, "%s: %s\n", k, v)
	}
	return b.String()
}

// TestCollectFieldsOrder sends the fields a Connection option can name
// before and after it, in random orders and subsets, from trusted and
// untrusted peers: one pass must remove exactly what two would.
func TestCollectFieldsOrder(t *testing.T) {
	lines := []string{
		"Connection: close, X-Hop", "Connection: keep-alive", "Connection: X-Forwarded-For",
		"Connection: Upgrade, x_hop", "Connection: cookie",
		"X-Hop: 1", "x_hop: 2", "X-HOP: 3", "Close: yes", "Cookie: a=1",
		"X-Forwarded-For: 192.0.2.1", "x_forwarded_for: 192.0.2.2", "X-Forwarded-Proto: https",
		"X-Forwarded-Host: shop.example.com", "Keep-Alive: timeout=5", "Upgrade: h2c",
		"Transfer_Encoding: x", "X-Internal-User: root", "Accept: */*", "Proxy-Connection: keep-alive",
	}
	in := &Internal{HeaderPrefixes: []string{"X-Internal-"}}
	rng := rand.New(rand.NewPCG(1, 2))
	var got, want FieldList
	for trial := range 4000 {
		n := 1 + rng.IntN(8)
		picked := make([]string, 0, n)
		for range n {
			picked = append(picked, lines[rng.IntN(len(lines))])
		}
		raw := "GET / HTTP/1.1\r\nHost: api.example.com\r\n" + strings.Join(picked, "\r\n") + "\r\n\r\n"
		var req fasthttp.Request
		if err := req.Header.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		o := &Outgoing{
			Host: []byte("api.example.com"), ClientHost: []byte("api.example.com"),
			Peer: netip.MustParseAddr("10.0.0.9"), Client: netip.MustParseAddr("10.0.0.9"),
			PeerTrusted: trial%2 == 0, Internal: in,
		}
		CollectFields(&got, &req.Header, o)
		collectTwoPass(&want, &req.Header, o)
		if listString(&got) != listString(&want) {
			t.Fatalf("request %q (trusted %v):\none pass:\n%stwo passes:\n%s", raw, o.PeerTrusted, listString(&got), listString(&want))
		}
	}
}

// TestClassify holds the class table to the lists it is built from.
func TestClassify(t *testing.T) {
	for _, n := range append(append([]string{}, framing...), hopByHop...) {
		for _, k := range []string{n, strings.ToUpper(n), strings.ToLower(n)} {
			if classify([]byte(k))&classDrop == 0 {
				t.Errorf("%s: not dropped", k)
			}
			if hop := classify([]byte(k))&classHop != 0; hop != slices.Contains(hopByHop, n) {
				t.Errorf("%s: hop-by-hop %v", k, hop)
			}
		}
		if u := strings.ReplaceAll(n, "-", "_"); u != n && classify([]byte(u)) != 0 {
			t.Errorf("%s: hop-by-hop names fold case only", u)
		}
	}
	for _, n := range GatewayOwned {
		for _, k := range []string{n, strings.ToLower(n), strings.ReplaceAll(n, "-", "_")} {
			if classify([]byte(k)) != classOwned {
				t.Errorf("%s: class %d, want the gateway's", k, classify([]byte(k)))
			}
		}
	}
	if classify([]byte("connection")) != classDrop|classHop|classConnection || classify([]byte("Keep-Alive")) != classDrop|classHop {
		t.Error("only Connection carries options")
	}
	for _, k := range []string{"Accept", "User-Agent", "X-Forwarded-Fo", "Hosts", "", strings.Repeat("a", 40)} {
		if classify([]byte(k)) != 0 {
			t.Errorf("%q classified", k)
		}
	}
}
