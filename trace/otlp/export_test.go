package otlp_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/trace"
	"github.com/tollgate/tollgate/trace/otlp"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// received collects what a collector was sent, decoded with the OTLP
// project's own types.
type received struct {
	mu   sync.Mutex
	reqs []*coltrace.ExportTraceServiceRequest
}

func (r *received) add(t testing.TB, body []byte) {
	req := new(coltrace.ExportTraceServiceRequest)
	if err := proto.Unmarshal(body, req); err != nil {
		t.Errorf("the export does not decode: %v", err)
		return
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
}

func (r *received) spans() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, req := range r.reqs {
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				out = append(out, ss.Spans...)
			}
		}
	}
	return out
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// sampleRecording is a refused-then-retried request's recording.
func sampleRecording() *trace.Recording {
	r := trace.NewRecording()
	r.TraceID = [16]byte{0x4b, 0xf9, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}
	r.SpanID = [8]byte{1, 1, 1, 1, 1, 1, 1, 1}
	r.ParentID = [8]byte{2, 2, 2, 2, 2, 2, 2, 2}
	now := time.Now()
	r.Start, r.End = now.UnixNano(), now.Add(3*time.Millisecond).UnixNano()
	r.Route, r.PathTemplate, r.Consumer, r.Service = "orders", "/orders/", "app-1", "orders-svc"
	r.Status, r.Attempts, r.Result, r.Node = 200, 2, "ok", "n1:8080"
	r.Client = netip.MustParseAddr("203.0.113.7")
	r.SetMethod([]byte("GET"))
	r.SetRequestID([]byte("rid-1"))
	tc := trace.Context{Rec: r}
	h := tc.StartSpan(trace.SpanUpstream, now)
	sp := tc.Span(h)
	sp.Instance, sp.Result, sp.Error = "127.0.0.1:1", "refused", true
	tc.EndSpan(h, now.Add(time.Millisecond))
	h = tc.StartSpan(trace.SpanUpstream, now.Add(time.Millisecond))
	tc.Span(h).Instance, tc.Span(h).Status, tc.Span(h).Result = "127.0.0.1:2", 200, "ok"
	tc.EndSpan(h, now.Add(2*time.Millisecond))
	tc.AddEvent("gateway answer", now, 429, "rate limited")
	return r
}

func attrs(s *tracepb.Span) map[string]any {
	m := map[string]any{}
	for _, kv := range s.Attributes {
		if _, ok := kv.Value.Value.(*commonpb.AnyValue_StringValue); ok {
			m[kv.Key] = kv.Value.GetStringValue()
		} else {
			m[kv.Key] = kv.Value.GetIntValue()
		}
	}
	return m
}

func fastRetry() otlp.Backoff {
	return otlp.Backoff{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond, MaxElapsed: 3 * time.Second, Timeout: time.Second}
}

// TestHTTPExportDecodes: a batch sent over OTLP/HTTP decodes with the
// OTLP project's types into the server span and its children, ids,
// parentage, attributes, events and statuses as recorded.
func TestHTTPExportDecodes(t *testing.T) {
	got := &received{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || r.Header.Get("X-Api-Key") != "k1" {
			t.Errorf("request %s %s %v", r.Method, r.URL.Path, r.Header)
		}
		body, _ := io.ReadAll(r.Body)
		got.add(t, body)
	}))
	defer srv.Close()
	send, err := otlp.NewHTTP(srv.URL, map[string]string{"X-Api-Key": "k1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := otlp.New(otlp.Config{Send: send, Resource: otlp.NewResource([][2]string{{"service.name", "edge"}}),
		BatchDelay: 20 * time.Millisecond, Retry: fastRetry()})
	defer e.Close()
	e.Offer(sampleRecording())
	waitFor(t, "three spans", func() bool { return len(got.spans()) == 3 })

	rs := got.reqs[0].ResourceSpans[0]
	if kv := rs.Resource.Attributes[0]; kv.Key != "service.name" || kv.Value.GetStringValue() != "edge" {
		t.Fatalf("resource %v", rs.Resource)
	}
	spans := got.spans()
	server, refused, answered := spans[0], spans[1], spans[2]
	if server.Name != "GET /orders/" || server.Kind != tracepb.Span_SPAN_KIND_SERVER ||
		string(server.ParentSpanId) != string([]byte{2, 2, 2, 2, 2, 2, 2, 2}) || len(server.TraceId) != 16 {
		t.Fatalf("server span %v", server)
	}
	a := attrs(server)
	for k, want := range map[string]any{"http.request.method": "GET", "http.route": "/orders/", "http.response.status_code": int64(200),
		"client.address": "203.0.113.7", "tollgate.route": "orders", "tollgate.consumer": "app-1", "tollgate.node": "n1:8080",
		"tollgate.service": "orders-svc", "tollgate.upstream.attempts": int64(2), "tollgate.request_id": "rid-1"} {
		if a[k] != want {
			t.Errorf("server span %s = %v, want %v", k, a[k], want)
		}
	}
	if len(server.Events) != 1 || server.Events[0].Name != "gateway answer" {
		t.Fatalf("events %v", server.Events)
	}
	for _, c := range []*tracepb.Span{refused, answered} {
		if string(c.ParentSpanId) != string(server.SpanId) || string(c.TraceId) != string(server.TraceId) ||
			c.Kind != tracepb.Span_SPAN_KIND_CLIENT || c.Name != "upstream" || c.EndTimeUnixNano < c.StartTimeUnixNano {
			t.Fatalf("child span %v", c)
		}
	}
	if attrs(refused)["server.address"] != "127.0.0.1:1" || refused.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Fatalf("refused attempt %v", refused)
	}
	if attrs(answered)["http.response.status_code"] != int64(200) || answered.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
		t.Fatalf("answered attempt %v", answered)
	}
	waitFor(t, "the export counted", func() bool { return e.Stats().Exported == 3 })
}

// TestHTTPRetryRules: 503 with Retry-After is tried again after the wait
// asked for; 400 is not tried again and its spans count as failed.
func TestHTTPRetryRules(t *testing.T) {
	var calls atomic.Int32
	var first, second atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1:
			first.Store(time.Now().UnixNano())
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
		case 2:
			second.Store(time.Now().UnixNano())
		default:
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	send, _ := otlp.NewHTTP(srv.URL+"/custom/path", nil, nil)
	e := otlp.New(otlp.Config{Send: send, BatchDelay: 10 * time.Millisecond, Retry: fastRetry()})
	defer e.Close()
	e.Offer(sampleRecording())
	waitFor(t, "the retried export", func() bool { return e.Stats().Exported == 3 })
	if d := time.Duration(second.Load() - first.Load()); d < 900*time.Millisecond {
		t.Fatalf("retried after %s, Retry-After asked 1s", d)
	}
	e.Offer(sampleRecording())
	waitFor(t, "the refused export", func() bool { return e.Stats().Failed == 3 })
	if n := calls.Load(); n != 3 {
		t.Fatalf("%d calls: a 400 was retried", n)
	}
	if st := e.Stats(); st.Retries != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// traceService is a gRPC collector that fails its first calls as told.
type traceService struct {
	coltrace.UnimplementedTraceServiceServer
	fail []error
	mu   sync.Mutex
	got  *received
	t    testing.TB
}

func (s *traceService) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.fail) > 0 {
		err := s.fail[0]
		s.fail = s.fail[1:]
		return nil, err
	}
	body, _ := proto.Marshal(req)
	s.got.add(s.t, body)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

func startCollector(t *testing.T, svc *traceService) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, svc)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// TestGRPCRetryRules: UNAVAILABLE is tried again, RESOURCE_EXHAUSTED only
// with the RetryInfo that says when (honoured), INVALID_ARGUMENT never.
func TestGRPCRetryRules(t *testing.T) {
	withInfo, _ := status.New(codes.ResourceExhausted, "slow down").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(700 * time.Millisecond)})
	svc := &traceService{got: &received{}, t: t, fail: []error{
		status.Error(codes.Unavailable, "starting"), withInfo.Err(),
	}}
	addr := startCollector(t, svc)
	send, err := otlp.NewGRPC(addr, map[string]string{"Authorization": "Bearer x"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := otlp.New(otlp.Config{Send: send, BatchDelay: 10 * time.Millisecond, Retry: fastRetry()})
	defer e.Close()
	start := time.Now()
	e.Offer(sampleRecording())
	waitFor(t, "the export after two retries", func() bool { return e.Stats().Exported == 3 })
	if d := time.Since(start); d < 700*time.Millisecond {
		t.Fatalf("exported after %s: RetryInfo asked 700ms", d)
	}
	if len(svc.got.spans()) != 3 || e.Stats().Retries != 2 {
		t.Fatalf("spans %d, stats %+v", len(svc.got.spans()), e.Stats())
	}
	svc.mu.Lock()
	svc.fail = []error{status.Error(codes.ResourceExhausted, "too big"), status.Error(codes.InvalidArgument, "bad")}
	svc.mu.Unlock()
	e.Offer(sampleRecording())
	e.Offer(sampleRecording())
	waitFor(t, "two refused exports", func() bool { return e.Stats().Failed >= 3 })
	time.Sleep(100 * time.Millisecond)
	if st := e.Stats(); st.Retries != 2 {
		t.Fatalf("a non-retryable status was retried: %+v", st)
	}
}

// TestQueueFullDrops: a collector that takes connections and never
// answers holds the worker; Offer still never waits, and what the queue
// cannot hold is dropped and counted.
func TestQueueFullDrops(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	send, _ := otlp.NewHTTP("http://"+ln.Addr().String(), nil, nil)
	e := otlp.New(otlp.Config{Send: send, QueueSize: 4, BatchSize: 1, BatchDelay: time.Millisecond,
		Retry: otlp.Backoff{Timeout: 300 * time.Millisecond, MaxElapsed: 500 * time.Millisecond, Initial: 100 * time.Millisecond}})
	start := time.Now()
	for range 100 {
		e.Offer(sampleRecording())
	}
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Fatalf("offering 100 recordings took %s", d)
	}
	if st := e.Stats(); st.Dropped < 95*3 {
		t.Fatalf("stats %+v: want at least 95 requests' spans dropped", st)
	}
	e.Close()
}
