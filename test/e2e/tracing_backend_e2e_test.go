//go:build e2e

package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// tracedBackend is a backend that takes part in the trace as an
// instrumented service does: it continues the trace it is sent
// (traceparent) with a span of its own, exported to the collector over
// OTLP/HTTP with the OpenTelemetry project's own message types, and keeps
// the trace fields it received for the test to compare.
type tracedBackend struct {
	Addr      string
	collector string // OTLP/HTTP host:port

	mu   sync.Mutex
	seen []http.Header
}

func startTracedBackend(t *testing.T, collector string) *tracedBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &tracedBackend{Addr: ln.Addr().String(), collector: collector}
	srv := &http.Server{Handler: http.HandlerFunc(b.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return b
}

func (b *tracedBackend) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	b.mu.Lock()
	b.seen = append(b.seen, r.Header.Clone())
	b.mu.Unlock()
	w.Write([]byte("order 42"))
	tp := strings.Split(r.Header.Get("traceparent"), "-")
	if len(tp) != 4 || tp[3] != "01" {
		return // not sampled: nothing to export
	}
	traceID, _ := hex.DecodeString(tp[1])
	parent, _ := hex.DecodeString(tp[2])
	spanID := make([]byte, 8)
	_, _ = rand.Read(spanID)
	str := func(k, v string) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
	}
	req := &coltrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("service.name", "orders-backend")}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{
			TraceId: traceID, SpanId: spanID, ParentSpanId: parent,
			Name: r.Method + " " + r.URL.Path, Kind: tracepb.Span_SPAN_KIND_SERVER,
			StartTimeUnixNano: uint64(start.UnixNano()), EndTimeUnixNano: uint64(time.Now().UnixNano()),
			Attributes: []*commonpb.KeyValue{str("x-b3-traceid", r.Header.Get("X-B3-TraceId"))},
		}}}},
	}}}
	body, _ := proto.Marshal(req)
	resp, err := http.Post("http://"+b.collector+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
	if err == nil {
		resp.Body.Close()
	}
}

// last returns the trace fields of the last request the backend got.
func (b *tracedBackend) last() http.Header {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.seen) == 0 {
		return nil
	}
	return b.seen[len(b.seen)-1]
}
