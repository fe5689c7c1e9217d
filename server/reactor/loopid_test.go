package reactor_test

import (
	"bufio"
	"testing"

	"github.com/tollgate/tollgate/internal/gatewaytest"
)

// TestLoopIDsUniqueAcrossTransports: two transports of one process (a
// gateway's cleartext and TLS listeners) number their loops apart, so the
// upstream pools kept per loop id never hand one loop's connections to the
// other's requests.
func TestLoopIDsUniqueAcrossTransports(t *testing.T) {
	o := npOptions()
	o.Workers = 1
	seen := map[string]bool{}
	for range 2 {
		_, addr := npServe(t, &loopStub{}, o)
		conn := gatewaytest.Dial(t, addr)
		gatewaytest.Write(t, conn, "GET /loop HTTP/1.1\r\nHost: x\r\n\r\n")
		resp := gatewaytest.ReadAnswer(t, conn, bufio.NewReader(conn), false)
		id := string(resp.Body())
		if seen[id] {
			t.Fatalf("two live transports' loops are both %q", id)
		}
		seen[id] = true
	}
}
