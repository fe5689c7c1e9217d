//go:build !race

package server

import "testing"

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
