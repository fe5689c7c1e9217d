//go:build linux && !race

package reactor

import (
	"net"
	"runtime"
	"testing"
)

// TestBatchedCallsAllocs gates the socket calls in batches: keep-alive
// requests served through a loop's ring, from the client's bytes to the
// answer's, allocate nothing in steady state (the whole process is
// counted, the client included).
func TestBatchedCallsAllocs(t *testing.T) {
	for _, mode := range []string{"on", "off"} {
		t.Run(mode, func(t *testing.T) {
			tr, addr := ringServe(t, mode)
			// Four connections, each sending before any is answered: the
			// loop reads and answers them in batches.
			var conns [4]net.Conn
			for i := range conns {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				conns[i] = c
			}
			req := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			buf := make([]byte, 4096)
			round := func() {
				for _, c := range conns {
					if _, err := c.Write(req); err != nil {
						t.Fatal(err)
					}
				}
				for _, c := range conns {
					if n, err := c.Read(buf); err != nil || n == 0 {
						t.Fatalf("read %d: %v", n, err)
					}
				}
			}
			for range 500 {
				round()
			}
			const n = 2000
			made := func() uint64 {
				n, _ := loopRing(tr)
				return n
			}
			var before, after runtime.MemStats
			made0 := made()
			runtime.ReadMemStats(&before)
			for range n {
				round()
			}
			runtime.ReadMemStats(&after)
			if per := float64(after.Mallocs-before.Mallocs) / float64(n*len(conns)); per > 0.01 {
				t.Fatalf("%.3f allocations per request", per)
			}
			if calls := made() - made0; mode == "on" && calls < n {
				t.Fatalf("%d calls through the ring for %d requests: too few batches to gate", calls, n*len(conns))
			}
		})
	}
}
