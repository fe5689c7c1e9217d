//go:build !race

package trace

import (
	"testing"

	"github.com/tollgate/tollgate/codec"
	"github.com/valyala/fasthttp"
)

// TestTraceAllocs gates the three points a request meets the trace at:
// reading the client's context from the checked section, writing it into
// the upstream fields and stamping the answer allocate nothing.
func TestTraceAllocs(t *testing.T) {
	req, r := checked(t, "GET / HTTP/1.1\r\nHost: a\r\nAccept: */*\r\nUser-Agent: wrk\r\n"+
		"traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nX-Request-Id: abc-1\r\n\r\n")
	var (
		tc   Context
		l    codec.FieldList
		resp fasthttp.Response
	)
	round := func() {
		Begin(&tc, r, &req.Header)
		l.Reset()
		Forward(&tc, &l)
		Stamp(&tc, &resp.Header, nil)
	}
	round()
	if n := testing.AllocsPerRun(1000, round); n != 0 {
		t.Fatalf("a request's trace allocates %.1f times, want 0", n)
	}
}

func BenchmarkBegin(b *testing.B) {
	req, r := checked(&testing.T{}, "GET / HTTP/1.1\r\nHost: a\r\nAccept: */*\r\nUser-Agent: wrk\r\nCookie: a=1\r\n"+
		"X-Forwarded-For: 192.0.2.1\r\ntraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n"+
		"X-Request-Id: abc-1\r\n\r\n")
	var tc Context
	b.ReportAllocs()
	for b.Loop() {
		Begin(&tc, r, &req.Header)
	}
}

// TestPropagationAllocs: reading B3 and writing every format allocate
// nothing either.
func TestPropagationAllocs(t *testing.T) {
	req, r := checked(t, "GET / HTTP/1.1\r\nHost: a\r\n"+
		"b3: 80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1-05e3ac9a4f6e3b90\r\n\r\n")
	var (
		tc Context
		l  codec.FieldList
	)
	round := func() {
		BeginWith(&tc, r, &req.Header, []Formats{W3C, B3Single | B3Multi}, W3C|B3Single|B3Multi)
		l.Reset()
		Forward(&tc, &l)
	}
	round()
	if n := testing.AllocsPerRun(1000, round); n != 0 {
		t.Fatalf("B3 in, every format out: %.1f allocations, want 0", n)
	}
}
