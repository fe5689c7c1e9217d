//go:build !race

package pipeline

import (
	"testing"

	"github.com/valyala/fasthttp"
)

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

// TestSlotAllocs gates the slots: once a context has held a value of a
// slot, setting, reading and releasing it again allocates nothing, for a
// struct, a scalar and a pointer alike.
func TestSlotAllocs(t *testing.T) {
	var req fasthttp.Request
	var resp fasthttp.Response
	buf := []byte("entry")
	c := NewOwned()
	round := func() {
		c.Req, c.Resp = &req, &resp
		testTicket.Set(c, slotTicket{gen: 9, armed: true})
		testChoice.Set(c, 2)
		testRecord.Set(c, &buf)
		if testTicket.Get(c).gen != 9 || testChoice.Get(c) != 2 || testRecord.Get(c) == nil {
			t.Fatal("a slot lost its value")
		}
		Release(c)
	}
	round()
	if n := testing.AllocsPerRun(1000, round); n != 0 {
		t.Fatalf("a request's slots allocate %.1f times, want 0", n)
	}
}
