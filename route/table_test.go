package route

import (
	"testing"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

func ctxFor(method, host, uri string) *pipeline.Ctx {
	req := &fasthttp.Request{}
	req.Header.SetMethod(method)
	req.Header.SetHost(host)
	req.SetRequestURI(uri)
	return &pipeline.Ctx{Req: req, Resp: &fasthttp.Response{}}
}

func TestMatchPrecedence(t *testing.T) {
	routes := []*Route{
		{Name: "any-prefix", Path: "/", Kind: Prefix},
		{Name: "api-prefix", Path: "/api/", Kind: Prefix},
		{Name: "api-order-prefix", Path: "/api/order/", Kind: Prefix},
		{Name: "exact-create", Path: "/api/order/create", Methods: []string{"POST"}},
		{Name: "host-exact", Host: "admin.example.com", Path: "/api/", Kind: Prefix},
		{Name: "host-wild", Host: "*.example.com", Path: "/api/", Kind: Prefix},
		{Name: "priority", Priority: 10, Path: "/promo", Kind: Prefix},
	}
	table, err := NewTable(routes)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, host, uri, want string
	}{
		{"POST", "x.com", "/api/order/create", "exact-create"},
		{"GET", "x.com", "/api/order/create", "api-order-prefix"}, // method filter
		{"GET", "x.com", "/api/order/42", "api-order-prefix"},     // longest prefix
		{"GET", "x.com", "/api/user", "api-prefix"},
		{"GET", "admin.example.com", "/api/user", "host-exact"},    // exact host beats wildcard (order)
		{"GET", "shop.example.com:8443", "/api/user", "host-wild"}, // wildcard, port ignored
		{"GET", "EXAMPLE.com", "/api/user", "api-prefix"},          // *.example.com does not match the apex
		{"GET", "SHOP.Example.COM", "/api/user", "host-wild"},      // hosts are case-insensitive
		{"GET", "x.com", "/promotions", "priority"},                // priority beats specificity
		{"GET", "x.com", "/other", "any-prefix"},
		{"GET", "x.com", "/api/../api/order/7", "api-order-prefix"}, // matched on the normalized path
	} {
		r := table.Match(ctxFor(tc.method, tc.host, tc.uri))
		if r == nil || r.Name != tc.want {
			got := "<nil>"
			if r != nil {
				got = r.Name
			}
			t.Errorf("%s %s%s: got %s, want %s", tc.method, tc.host, tc.uri, got, tc.want)
		}
	}
}

func TestNoMatchAndBadTables(t *testing.T) {
	table, err := NewTable([]*Route{{Name: "a", Path: "/a"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := table.Match(ctxFor("GET", "h", "/b")); r != nil {
		t.Fatalf("matched %s", r.Name)
	}
	if _, err := NewTable([]*Route{{Name: "a", Path: "/a"}, {Name: "a", Path: "/b"}}); err == nil {
		t.Fatal("duplicate names accepted")
	}
	if _, err := NewTable([]*Route{{Name: "a", Path: "a"}}); err == nil {
		t.Fatal("relative path accepted")
	}
}

func BenchmarkMatch(b *testing.B) {
	var routes []*Route
	for i := range 20 {
		routes = append(routes, &Route{Name: string(rune('a'+i)) + "-r", Path: "/svc" + string(rune('a'+i)) + "/", Kind: Prefix})
	}
	table, _ := NewTable(routes)
	c := ctxFor("GET", "api.example.com", "/svcm/orders/42")
	b.ReportAllocs()
	for b.Loop() {
		if table.Match(c) == nil {
			b.Fatal("no match")
		}
	}
}
