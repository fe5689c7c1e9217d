package ipacl

import (
	"net/netip"
	"testing"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

func TestACL(t *testing.T) {
	acl, err := New([]string{"10.0.0.0/8", "2001:db8::/32", "192.0.2.7"}, []string{"10.6.6.0/24", "2001:db8:bad::/48"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ip    string
		allow bool
	}{
		{"10.1.2.3", true},
		{"::ffff:10.1.2.3", true}, // mapped IPv4
		{"10.6.6.9", false},       // deny wins
		{"192.0.2.7", true},       // single address
		{"192.0.2.8", false},      // not on the allow list
		{"2001:db8:1::1", true},
		{"2001:db8:bad::1", false},
		{"2001:db9::1", false},
	} {
		var req fasthttp.Request
		var resp fasthttp.Response
		c := pipeline.AcquireParsed(&req, &resp)
		c.ClientIP = netip.MustParseAddr(tc.ip)
		got := acl.Handle(c) == pipeline.Continue
		if got != tc.allow {
			t.Errorf("%s: allowed=%v, want %v", tc.ip, got, tc.allow)
		}
		if !got && (resp.StatusCode() != 403 || string(resp.Header.ContentType()) != "application/json") {
			t.Errorf("%s: refusal %d %s", tc.ip, resp.StatusCode(), resp.Body())
		}
		pipeline.Release(c)
	}
	if a, err := New(nil, nil); a != nil || err != nil {
		t.Fatal("empty lists must give no filter")
	}
	if _, err := New([]string{"10.0.0.0/33"}, nil); err == nil {
		t.Fatal("bad CIDR accepted")
	}
}
