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

// BenchmarkEncodeBatch: a batch of 512 requests' spans into a reused
// buffer, as a worker does.
func BenchmarkEncodeBatch(b *testing.B) {
	recs := make([]*trace.Recording, 512)
	for i := range recs {
		recs[i] = benchRecording()
	}
	res := NewResource([][2]string{{"service.name", "tollgate"}, {"host.name", "h1"}})
	buf := AppendRequest(nil, res, "v1", recs)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		buf = AppendRequest(buf[:0], res, "v1", recs)
	}
}

func TestEncodeAllocs(t *testing.T) {
	recs := []*trace.Recording{benchRecording(), benchRecording()}
	res := NewResource([][2]string{{"service.name", "tollgate"}})
	buf := AppendRequest(nil, res, "", recs)
	if n := testing.AllocsPerRun(100, func() { buf = AppendRequest(buf[:0], res, "", recs) }); n != 0 {
		t.Fatalf("encoding into a reused buffer allocates %.1f times", n)
	}
}
