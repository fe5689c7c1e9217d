package testutil

import (
	"net"
	"testing"

	"github.com/valyala/fasthttp"
)

// StartHandler serves h on a loopback address until the test ends, for
// tests that need a backend with behaviour of its own (answers that
// depend on the request, a new release that answers differently). It
// returns the address and a function that stops the server early.
func StartHandler(t testing.TB, h fasthttp.RequestHandler) (addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: h, DisableHeaderNamesNormalizing: true}
	go srv.Serve(ln) //nolint:errcheck
	stop = func() { _ = srv.Shutdown() }
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}
