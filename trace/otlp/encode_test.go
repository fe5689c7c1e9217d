package otlp

import (
	"net/netip"
	"testing"
	"time"

	"github.com/tollgate/tollgate/trace"
)

func benchRecording() *trace.Recording {
	r := trace.NewRecording()
	r.TraceID, r.SpanID = [16]byte{1, 2, 3}, [8]byte{4, 5, 6}
	r.Start, r.End = time.Now().UnixNano(), time.Now().UnixNano()+1e6
	r.Route, r.PathTemplate, r.Consumer, r.Status, r.Service, r.Attempts = "orders", "/orders/", "app-1", 200, "orders", 1
	r.Client = netip.MustParseAddr("203.0.113.7")
	r.SetMethod([]byte("GET"))
	r.SetRequestID([]byte("4bf92f3577b34da6a3ce929d0e0e4736"))
	tc := trace.Context{Rec: r}
	h := tc.StartSpan(trace.SpanUpstream, time.Now())
	tc.Span(h).Instance, tc.Span(h).Status, tc.Span(h).Result = "10.0.0.1:8080", 200, "ok"
	tc.EndSpan(h, time.Now())
	return r
}

// BenchmarkEncodeSpans: one request's spans into a reused buffer, as a
// request hands them over.
func BenchmarkEncodeSpans(b *testing.B) {
	r := benchRecording()
	buf := AppendSpans(nil, r)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		buf = AppendSpans(buf[:0], r)
	}
}

// BenchmarkEncodeBatch: a batch of 512 requests' spans put together into
// a reused buffer, as a worker does.
func BenchmarkEncodeBatch(b *testing.B) {
	parts := make([][]byte, 512)
	for i := range parts {
		parts[i] = AppendSpans(nil, benchRecording())
	}
	res := NewResource([][2]string{{"service.name", "tollgate"}, {"host.name", "h1"}})
	buf := AppendRequest(nil, res, "v1", parts)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		buf = AppendRequest(buf[:0], res, "v1", parts)
	}
}

func TestEncodeAllocs(t *testing.T) {
	r := benchRecording()
	res := NewResource([][2]string{{"service.name", "tollgate"}})
	var one []byte
	parts := [][]byte{AppendSpans(nil, r), AppendSpans(nil, r)}
	buf := AppendRequest(nil, res, "", parts)
	if n := testing.AllocsPerRun(100, func() {
		one = AppendSpans(one[:0], r)
		buf = AppendRequest(buf[:0], res, "", parts)
	}); n != 0 {
		t.Fatalf("encoding into reused buffers allocates %.1f times", n)
	}
}
