package trace

import (
	"bufio"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/codec"
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
		var tr Context
		if got := parseTraceparent([]byte(tc.v), &tr); got != tc.ok {
			t.Errorf("%q: got %v, want %v", tc.v, got, tc.ok)
		}
	}
}

// checked reads raw as a transport would and indexes it as the gateway's
// check does, for Begin to read the trace from.
func checked(t *testing.T, raw string) (*fasthttp.Request, *codec.Received) {
	t.Helper()
	req := new(fasthttp.Request)
	if err := req.Header.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	r := new(codec.Received)
	if err := r.Check(&req.Header, &codec.Limits{MaxHeaderBytes: 8 << 10}); err != nil {
		t.Fatal(err)
	}
	return req, r
}

func TestBegin(t *testing.T) {
	req, r := checked(t, "GET / HTTP/1.1\r\nHost: a\r\n"+
		"traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n"+
		"X-Request-Id: bad id with spaces\r\n\r\n")
	var tc Context
	Begin(&tc, r, &req.Header)
	if string(tc.TraceHex[:]) != "4bf92f3577b34da6a3ce929d0e0e4736" || tc.Flags != 1 {
		t.Fatalf("trace id %s flags %d", tc.TraceHex[:], tc.Flags)
	}
	if string(tc.RequestID) != string(tc.TraceHex[:]) {
		t.Fatalf("an unsafe request id was kept: %q", tc.RequestID)
	}
	var resp fasthttp.Response
	Stamp(&tc, &resp.Header, nil)
	tp := string(resp.Header.Peek("traceparent"))
	if !strings.HasPrefix(tp, "00-4bf92f3577b34da6a3ce929d0e0e4736-") || !strings.HasSuffix(tp, "-01") ||
		strings.Contains(tp, "00f067aa0ba902b7") {
		t.Fatalf("response traceparent %q", tp)
	}
	if rid := string(resp.Header.Peek("X-Request-Id")); rid != string(tc.RequestID) {
		t.Fatalf("response X-Request-Id %q, want %q", rid, tc.RequestID)
	}
	// Two requests without context get different trace ids.
	var r2 fasthttp.Request
	var c2 Context
	Begin(&c2, new(codec.Received), &r2.Header)
	if c2.TraceHex == tc.TraceHex {
		t.Fatal("new trace reused an id")
	}
}

// TestBeginKeepsAClientsRequestID: an acceptable X-Request-Id is the
// request's id, read from the checked index, and from the header itself
// for a request the check refused (whose answer still carries it).
func TestBeginKeepsAClientsRequestID(t *testing.T) {
	req, r := checked(t, "GET / HTTP/1.1\r\nHost: a\r\nx-request-id: order-42:retry.1\r\n\r\n")
	var tc Context
	Begin(&tc, r, &req.Header)
	if string(tc.RequestID) != "order-42:retry.1" || tc.ParentID != [8]byte{} {
		t.Fatalf("request id %q, parent %x", tc.RequestID, tc.ParentID)
	}
	var refused fasthttp.Request
	refused.Header.Set("X-Request-Id", "r1")
	Begin(&tc, new(codec.Received), &refused.Header)
	if string(tc.RequestID) != "r1" {
		t.Fatalf("a refused request's id: %q, want r1", tc.RequestID)
	}
}

// TestForwardContinuesTheTrace: the backend gets the client's trace with
// the gateway's span as its parent, and the request id.
func TestForwardContinuesTheTrace(t *testing.T) {
	req, r := checked(t, "GET / HTTP/1.1\r\nHost: a\r\n"+
		"traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n\r\n")
	var tc Context
	Begin(&tc, r, &req.Header)
	var l codec.FieldList
	Forward(&tc, &l)
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + string(tc.SpanHex[:]) + "-01"
	if got := string(l.Get("traceparent")); got != want {
		t.Fatalf("upstream traceparent %q, want %q", got, want)
	}
	if got := string(l.Get("X-Request-Id")); got != string(tc.TraceHex[:]) {
		t.Fatalf("upstream X-Request-Id %q, want the trace id", got)
	}
}

// TestTraceFieldsAreTheGateways: the package declares its fields as the
// gateway's own, so a client's copies are not forwarded beside Forward's
// and a backend's do not reach the client beside Stamp's.
func TestTraceFieldsAreTheGateways(t *testing.T) {
	for _, k := range []string{"traceparent", "X-Request-Id", "x_request_id"} {
		if !codec.IsGatewayOwned(k) {
			t.Errorf("%s: a client's copy would be forwarded", k)
		}
	}
	var r fasthttp.Response
	r.Header.Set("Traceparent", "00-x")
	r.Header.Set("X-Request-Id", "theirs")
	codec.StripResponseHopByHop(&r.Header)
	if len(r.Header.Peek("Traceparent")) != 0 || len(r.Header.Peek("X-Request-Id")) != 0 {
		t.Fatalf("a backend's trace fields survived:\n%s", r.Header.Header())
	}
}
