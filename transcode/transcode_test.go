package transcode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/internal/testutil/grpcorders"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/upstream"
	"github.com/valyala/fasthttp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
)

func orders(t testing.TB, method string) *Step {
	t.Helper()
	p := filepath.Join(t.TempDir(), "orders.pb")
	if err := os.WriteFile(p, grpcorders.DescriptorSet, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(&Config{Service: "shop.v1.Orders", Method: method, Descriptors: p})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ctxFor(method, target, body string) *pipeline.Ctx {
	req, resp := new(fasthttp.Request), new(fasthttp.Response)
	req.SetRequestURI("http://h" + target)
	req.Header.SetMethod(method)
	if body != "" {
		req.Header.SetContentType("application/json")
		req.SetBodyString(body)
	}
	return pipeline.AcquireParsed(req, resp)
}

// TestHTTPRuleRead: the google.api.http annotation is read from the
// descriptor set's raw method options.
func TestHTTPRuleRead(t *testing.T) {
	c, g := orders(t, "Create"), orders(t, "Get")
	if !c.hasRule || c.rule.Method != "POST" || c.rule.Body != "*" || len(c.rule.Path.segs) != 2 {
		t.Fatalf("Create: %+v", c.rule)
	}
	if !g.hasRule || g.rule.Method != "GET" || g.rule.Body != "" || len(g.rule.Path.vars) != 1 || g.rule.Path.vars[0].Field != "id" {
		t.Fatalf("Get: %+v", g.rule)
	}
	if g.Method() != "/shop.v1.Orders/Get" {
		t.Fatal(g.Method())
	}
}

// TestTemplates: path templates, their variables and what they refuse.
func TestTemplates(t *testing.T) {
	for _, tc := range []struct {
		tmpl, path string
		match      bool
		vars       string
	}{
		{"/v1/orders/{id}", "/v1/orders/7", true, "id=7"},
		{"/v1/orders/{id}", "/v1/orders/7/x", false, ""},
		{"/v1/orders/{id}", "/v1/orders/a%20b", true, "id=a b"},
		{"/v1/{name=shelves/*/books/*}", "/v1/shelves/s1/books/b2", true, "name=shelves/s1/books/b2"},
		{"/v1/{name=shelves/*/books/*}", "/v1/shelves/s1/cds/b2", false, ""}, // literals inside a variable still match exactly
		{"/v1/files/{path=**}", "/v1/files/a/b/c", true, "path=a/b/c"},
		{"/v1/{a}/{b}:undelete", "/v1/x/y:undelete", true, "a=x,b=y"},
		{"/v1/{a}/{b}:undelete", "/v1/x/y", false, ""},
		{"/v1/static", "/v1/static", true, ""},
	} {
		tp, err := parseTemplate(tc.tmpl)
		if err != nil {
			t.Fatalf("%s: %v", tc.tmpl, err)
		}
		var got []string
		ok, err := tp.match(tc.path, func(f, v string) error { got = append(got, f+"="+v); return nil })
		if err != nil || ok != tc.match || (ok && strings.Join(got, ",") != tc.vars) {
			t.Fatalf("%s on %s: %v %v %v", tc.tmpl, tc.path, ok, got, err)
		}
	}
	// An encoded '/' never becomes a separator inside a variable.
	tp, _ := parseTemplate("/v1/orders/{id}")
	if ok, err := tp.match("/v1/orders/a%2Fb", func(string, string) error { return nil }); !ok || err == nil {
		t.Fatalf("an encoded slash in a variable: %v %v", ok, err)
	}
	for _, bad := range []string{"v1/x", "/v1/{id", "/v1/{=x}", "/v1/a{id}", "/v1//x", "/v1/**/x"} {
		if _, err := parseTemplate(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}

// TestRequestAndReply: a request becomes the message the JSON says, and a
// reply the JSON of its message.
func TestRequestAndReply(t *testing.T) {
	s := orders(t, "Create")
	c := ctxFor("POST", "/v1/orders", `{"sku":"abc","quantity":2,"customer_id":"c","tags":["a"]}`)
	if s.Handle(c) != pipeline.Continue || upstream.GRPCCallOf(c) == nil || upstream.GRPCCallOf(c).Method != "/shop.v1.Orders/Create" {
		t.Fatalf("%d %s", c.Resp.StatusCode(), c.Resp.Body())
	}
	in := dynamicpb.NewMessage(s.inDesc)
	if err := proto.Unmarshal(upstream.GRPCCallOf(c).Request, in); err != nil {
		t.Fatal(err)
	}
	if got, _ := protojson.Marshal(in); !strings.Contains(string(got), `"customerId":"c"`) {
		t.Fatalf("request %s", got)
	}
	out := dynamicpb.NewMessage(s.outDesc)
	_ = protojson.Unmarshal([]byte(`{"id":"o-1","totalCents":"12"}`), out)
	upstream.GRPCCallOf(c).Reply, _ = proto.Marshal(out)
	upstream.GRPCCallOf(c).Done = true
	s.HandleResponse(c)
	if c.Resp.StatusCode() != 200 || !strings.Contains(string(c.Resp.Body()), `"totalCents":"12"`) {
		t.Fatalf("%d %s", c.Resp.StatusCode(), c.Resp.Body())
	}
}

// TestQueryCannotRedoThePath: a query parameter naming the field a path
// variable set is not applied (the route and its filters saw the path),
// and a single-valued field given twice is refused.
func TestQueryCannotRedoThePath(t *testing.T) {
	g := orders(t, "Get")
	c := ctxFor("GET", "/v1/orders/o-1?id=o-2&limit=3", "")
	if g.Handle(c) != pipeline.Continue {
		t.Fatalf("%d %s", c.Resp.StatusCode(), c.Resp.Body())
	}
	in := dynamicpb.NewMessage(g.inDesc)
	if err := proto.Unmarshal(upstream.GRPCCallOf(c).Request, in); err != nil {
		t.Fatal(err)
	}
	if got, _ := protojson.Marshal(in); !strings.Contains(string(got), `"id":"o-1"`) || !strings.Contains(string(got), `"limit":3`) {
		t.Fatalf("built %s", got)
	}
	c = ctxFor("GET", "/v1/orders/o-1?limit=3&limit=4", "")
	if g.Handle(c) != pipeline.Stop || c.Resp.StatusCode() != 400 || !strings.Contains(string(c.Resp.Body()), "limit") {
		t.Fatalf("a repeated single-valued parameter: %d %s", c.Resp.StatusCode(), c.Resp.Body())
	}
}

// TestEmptyPathVariableIsNotFound: "/v1/orders/" names no order; it is
// answered 404, as grpc-gateway does, instead of calling Get with an
// empty id.
func TestEmptyPathVariableIsNotFound(t *testing.T) {
	g := orders(t, "Get")
	for _, target := range []string{"/v1/orders/", "/v1/orders/?id=x"} {
		c := ctxFor("GET", target, "")
		if g.Handle(c) != pipeline.Stop || c.Resp.StatusCode() != 404 || upstream.GRPCCallOf(c) != nil {
			t.Fatalf("%s: %d %s", target, c.Resp.StatusCode(), c.Resp.Body())
		}
	}
	c := ctxFor("GET", "/v1/orders/o-1", "")
	if g.Handle(c) != pipeline.Continue {
		t.Fatalf("a named order: %d %s", c.Resp.StatusCode(), c.Resp.Body())
	}
}

// TestStepDoesNotAllocate: a call through the step, both ways, allocates
// nothing once its pools are warm.
func TestStepDoesNotAllocate(t *testing.T) {
	if testutil.Race {
		t.Skip("the race detector allocates")
	}
	s := orders(t, "Get")
	c := ctxFor("GET", "/v1/orders/o-7?with_items=true&limit=3", "")
	reply := []byte{0x0a, 0x03, 'o', '-', '7', 0x18, 0x02, 0x42, 0x01, 'x'}
	run := func() {
		if s.Handle(c) != pipeline.Continue {
			t.Fatal(string(c.Resp.Body()))
		}
		call := upstream.GRPCCallOf(c)
		call.Reply, call.Done = append(call.Reply[:0], reply...), true
		s.HandleResponse(c)
		c.Resp.Reset()
	}
	run()
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Fatalf("%v allocations per call", n)
	}
}

func benchStep(b *testing.B, s *Step, c *pipeline.Ctx, reply []byte) {
	b.ReportAllocs()
	for b.Loop() {
		if s.Handle(c) != pipeline.Continue {
			b.Fatal(string(c.Resp.Body()))
		}
		if reply != nil {
			upstream.GRPCCallOf(c).Reply = append(upstream.GRPCCallOf(c).Reply[:0], reply...)
			upstream.GRPCCallOf(c).Done = true
		}
		s.HandleResponse(c)
		c.Resp.Reset()
	}
}

// BenchmarkTranscode is the conversion path of one call, both ways, without
// the call: JSON body to request message, reply message to JSON.
func BenchmarkTranscode(b *testing.B) {
	s := orders(b, "Create")
	out := dynamicpb.NewMessage(s.outDesc)
	_ = protojson.Unmarshal([]byte(`{"id":"o-abc","sku":"abc","quantity":2,"customerId":"c-1","status":"created","totalCents":"2500"}`), out)
	reply, _ := proto.Marshal(out)
	b.Run("small", func(b *testing.B) {
		benchStep(b, s, ctxFor("POST", "/v1/orders", `{"sku":"abc","quantity":2,"customerId":"c-1"}`), reply)
	})
	b.Run("request-only", func(b *testing.B) {
		benchStep(b, s, ctxFor("POST", "/v1/orders", `{"sku":"abc","quantity":2,"customerId":"c-1"}`), nil)
	})
	g := orders(b, "Get")
	b.Run("path-and-query", func(b *testing.B) {
		benchStep(b, g, ctxFor("GET", "/v1/orders/o-7?with_items=true&limit=3", ""), reply)
	})
}

// FuzzTranscode: whatever body, path and query a client sends, the step
// builds a message or refuses with a 4xx; it never panics, and what it
// builds decodes as the method's input.
func FuzzTranscode(f *testing.F) {
	f.Add(`{"sku":"abc","quantity":2}`, "/v1/orders/o-1", "limit=3&with_items=true")
	f.Add(`{"notes":{"a":"b"},"tags":["x"]}`, "/v1/orders/%2F", "limit=-1")
	f.Add(`{"quantity":"9999999999"}`, "/v1/orders/", "id=1&id=2")
	create, get := orders(f, "Create"), orders(f, "Get")
	f.Fuzz(func(t *testing.T, body, path, query string) {
		for _, s := range []*Step{create, get} {
			c := ctxFor("POST", "/v1/orders", body)
			c.Target.Path = append(c.Target.Path[:0], path...)
			c.Target.Query = append(c.Target.Query[:0], query...)
			if s.Handle(c) == pipeline.Continue {
				if err := proto.Unmarshal(upstream.GRPCCallOf(c).Request, dynamicpb.NewMessage(s.inDesc)); err != nil {
					t.Fatalf("built a request that does not decode: %v", err)
				}
				s.HandleResponse(c)
			} else if st := c.Resp.StatusCode(); st < 400 || st >= 500 {
				t.Fatalf("refused with %d", st)
			}
		}
	})
}
