package upstream

import (
	"encoding/hex"
	"net/netip"
	"testing"
	"time"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/trace"
	"github.com/valyala/fasthttp"
)

// TestAttemptSpans: every try upstream is a span of its own naming the
// instance, a refused first try and the retry that answered alike, and a
// request that is not recorded records nothing.
func TestAttemptSpans(t *testing.T) {
	up := testutil.StartUpstream(t, "alive")
	dead := testutil.FreeAddr(t)
	svc := newService(t, ServiceConfig{Name: "orders", Retry: 1}, Pool{}, dead, up.Addr)
	retried := false
	for range 4 {
		req, resp := &fasthttp.Request{}, &fasthttp.Response{}
		req.Header.SetMethod("GET")
		req.SetRequestURI("/x")
		req.Header.SetHost("api.example.com")
		c := &pipeline.Ctx{Req: req, Resp: resp, Start: time.Now(), Peer: netip.MustParseAddrPort("203.0.113.7:5555")}
		_ = codec.ParseTarget(&c.Target, &req.Header)
		c.Trace.TraceID, c.Trace.SpanID = [16]byte{1}, [8]byte{2}
		c.Trace.FillHex()
		c.Trace.SetRequestID([]byte("rid-1"))
		c.Trace.Rec = trace.NewRecording()
		before := time.Now().UnixNano()
		proxy(c, svc)
		spans := c.Trace.Rec.Spans()
		if len(spans) != c.Outcome.Attempts {
			t.Fatalf("%d spans for %d attempts", len(spans), c.Outcome.Attempts)
		}
		last := spans[len(spans)-1]
		if last.Instance != up.Addr || last.Status != 200 || last.Result != "ok" || last.Error || last.Service != "orders" {
			t.Fatalf("answering attempt's span: %+v", last)
		}
		// The backend continues the trace under the try that reached it.
		want := "00-01000000000000000000000000000000-" + hex.EncodeToString(last.ID[:]) + "-00"
		if got := up.Last().Header("Traceparent"); got != want {
			t.Fatalf("the backend got traceparent %q, want %q (the try's span as parent)", got, want)
		}
		if len(spans) == 2 {
			retried = true
			first := spans[0]
			if first.Instance != dead || first.Result != "refused" || !first.Error || first.Status != 0 {
				t.Fatalf("refused attempt's span: %+v", first)
			}
			if first.ID == last.ID || first.End > last.Start {
				t.Fatalf("the retry is not a span after the first: %+v %+v", first, last)
			}
		}
		for _, s := range spans {
			if s.Kind != trace.SpanUpstream || s.Start < before || s.End < s.Start {
				t.Fatalf("span times or kind: %+v", s)
			}
		}
		c.Trace.Rec.Release()
	}
	if !retried {
		t.Fatal("no request was retried: the dead instance was never picked first")
	}
	c, _ := serve(t, svc, "GET", "/x")
	if c.Trace.Rec != nil {
		t.Fatal("an unrecorded request got a recording")
	}
}

// TestGRPCAttemptSpanKind: a try of a gRPC service is a gRPC call's span.
func TestGRPCAttemptSpanKind(t *testing.T) {
	svc := newService(t, ServiceConfig{Name: "g", Protocol: "grpc"}, Pool{}, "127.0.0.1:1")
	c := &pipeline.Ctx{}
	c.Trace.Rec = trace.NewRecording()
	defer c.Trace.Rec.Release()
	h := svc.startAttempt(c)
	if sp := c.Trace.Span(h); sp == nil || sp.Kind != trace.SpanGRPCCall || sp.Kind.Name() != "grpc call" || !sp.Kind.Client() {
		t.Fatalf("span %+v", sp)
	}
}
