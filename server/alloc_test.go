//go:build !race

package server_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/server"
	"github.com/valyala/fasthttp"
)

// TestGatewayServeAllocs gates the request path from a parsed request to
// the upstream's answer: it must not allocate in steady state.
func TestGatewayServeAllocs(t *testing.T) {
	gw, req, resp, peer := benchGateway(t)
	for range 100 {
		serveBench(gw, req, resp, peer)
	}
	if resp.StatusCode() != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode(), resp.Body())
	}
	if n := testing.AllocsPerRun(500, func() { serveBench(gw, req, resp, peer) }); n != 0 {
		t.Fatalf("serving a proxied GET allocates %.2f times per request, want 0", n)
	}
}

// TestProxyPathAllocs gates the whole request path on an event loop, from
// the client's bytes to the answer's, the upstream exchange included: it
// must not allocate in steady state.
func TestProxyPathAllocs(t *testing.T) {
	for name, raw := range map[string]string{"wrk": proxyPathRequest, "browser": browserRequest, "late Connection": lateConnectionRequest} {
		for _, parsed := range []bool{false, true} {
			p := newProxyPathFor(t, raw)
			p.loop.parsed = parsed
			for range 100 {
				if st := p.serve(); st != 200 {
					t.Fatalf("%s: status %d", name, st)
				}
			}
			if held := p.held > 0; held == parsed {
				t.Fatalf("%s: %d of 100 answers held as read, with the answer parsed: %v", name, p.held, parsed)
			}
			if n := testing.AllocsPerRun(500, func() { p.serve() }); n != 0 {
				t.Errorf("%s (answer parsed: %v): a proxied GET on an event loop allocates %.2f times per request, want 0", name, parsed, n)
			}
		}
	}
}

// TestParseErrorAnswerAllocs: answering a malformed request, whatever the
// error, renders nothing (a flood of them must not allocate).
func TestParseErrorAnswerAllocs(t *testing.T) {
	errs := append([]error{fasthttp.ErrBodyTooLarge, fmt.Errorf("wrapped: %w", codec.ErrBadPath),
		errors.New("something else")}, codec.Errors...)
	for _, err := range errs {
		if n := testing.AllocsPerRun(50, func() { _ = server.CannedFor(err) }); n != 0 {
			t.Errorf("%v: %v allocations", err, n)
		}
	}
}
