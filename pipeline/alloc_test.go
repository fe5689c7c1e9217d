//go:build !race

package pipeline

import "testing"

// TestChainAllocs gates the filter pipeline: acquiring a Ctx, running five
// filters with response sides and an action, and releasing, allocates
// nothing; neither does answering with a canned rejection.
func TestChainAllocs(t *testing.T) {
	ch, req, resp := benchChain()
	runOnce(ch, req, resp)
	if n := testing.AllocsPerRun(500, func() { runOnce(ch, req, resp) }); n != 0 {
		t.Fatalf("running a chain allocates %.1f times, want 0", n)
	}
	reject := NewCanned(919, "cluster limit")
	n := testing.AllocsPerRun(500, func() {
		c := Acquire(req, resp)
		c.Reject(reject)
		Release(c)
	})
	if n != 0 {
		t.Fatalf("a canned rejection allocates %.1f times, want 0", n)
	}
}
