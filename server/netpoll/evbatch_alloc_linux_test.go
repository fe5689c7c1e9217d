//go:build linux && !race

package netpoll

import (
	"net"
	"net/netip"
	"runtime"
	"testing"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

type fixedAnswer struct{}

func (h fixedAnswer) Serve(req *fasthttp.Request, resp *fasthttp.Response, peer netip.AddrPort) bool {
	return h.ServeOn(req, resp, peer, nil)
}

func (fixedAnswer) ServeOn(_ *fasthttp.Request, resp *fasthttp.Response, _ netip.AddrPort, _ pipeline.Loop) bool {
	resp.SetBodyRaw(fixedBody)
	return false
}

func (fixedAnswer) ServeError(error, *fasthttp.Request, *fasthttp.Response, netip.AddrPort) {}

var fixedBody = []byte("fixed")

// TestBatchedCallsAllocs gates the socket calls in batches: keep-alive
// requests served through a loop's ring, from the client's bytes to the
// answer's, allocate nothing in steady state (the whole process is
// counted, the client included).
func TestBatchedCallsAllocs(t *testing.T) {
	for _, mode := range []string{"on", "off"} {
		t.Run(mode, func(t *testing.T) {
			_, addr := ringServeWith(t, fixedAnswer{}, mode)
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			req := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			buf := make([]byte, 4096)
			round := func() {
				if _, err := conn.Write(req); err != nil {
					t.Fatal(err)
				}
				if n, err := conn.Read(buf); err != nil || n == 0 {
					t.Fatalf("read %d: %v", n, err)
				}
			}
			for range 500 {
				round()
			}
			const n = 5000
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range n {
				round()
			}
			runtime.ReadMemStats(&after)
			if per := float64(after.Mallocs-before.Mallocs) / n; per > 0.01 {
				t.Fatalf("%.3f allocations per request", per)
			}
		})
	}
}
