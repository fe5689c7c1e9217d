package observe

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

func TestParseTraceparent(t *testing.T) {
	for _, tc := range []struct {
		v  string
		ok bool
	}{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true},
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", true}, // future version, longer
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", false},
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false}, // uppercase
		{"00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", false},
		{"", false},
	} {
		var tr pipeline.Trace
		if got := parseTraceparent([]byte(tc.v), &tr); got != tc.ok {
			t.Errorf("%q: got %v, want %v", tc.v, got, tc.ok)
		}
	}
}

func TestStartTrace(t *testing.T) {
	var req fasthttp.Request
	var resp fasthttp.Response
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	req.Header.Set("X-Request-Id", "bad id with spaces")
	c := pipeline.AcquireParsed(&req, &resp)
	defer pipeline.Release(c)
	StartTrace(c)
	if string(c.Trace.TraceHex[:]) != "4bf92f3577b34da6a3ce929d0e0e4736" || c.Trace.Flags != 1 {
		t.Fatalf("trace id %s flags %d", c.Trace.TraceHex[:], c.Trace.Flags)
	}
	if string(c.Trace.RequestID) != string(c.Trace.TraceHex[:]) {
		t.Fatalf("an unsafe request id was kept: %q", c.Trace.RequestID)
	}
	StampResponse(c)
	tp := string(resp.Header.Peek("traceparent"))
	if !strings.HasPrefix(tp, "00-4bf92f3577b34da6a3ce929d0e0e4736-") || !strings.HasSuffix(tp, "-01") ||
		strings.Contains(tp, "00f067aa0ba902b7") {
		t.Fatalf("response traceparent %q", tp)
	}
	// Two requests without context get different trace ids.
	var r2 fasthttp.Request
	c2 := pipeline.AcquireParsed(&r2, &resp)
	defer pipeline.Release(c2)
	StartTrace(c2)
	if c2.Trace.TraceHex == c.Trace.TraceHex {
		t.Fatal("new trace reused an id")
	}
}
