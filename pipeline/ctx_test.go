package pipeline

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// TestOwnedCtxStaysWithItsOwner: Release resets a transport's context like
// a pooled one, and leaves it to its owner; given to the pool as well, the
// next Acquire on this P would hand the same context to another request
// while its owner still uses it.
func TestOwnedCtxStaysWithItsOwner(t *testing.T) {
	var req fasthttp.Request
	var resp fasthttp.Response
	for i := range 100 {
		c := NewOwned()
		c.Req, c.Resp = &req, &resp
		c.RouteName = "orders"
		c.Scratch = append(c.Scratch, "scratch"...)
		Release(c)
		if c.Req != nil || c.RouteName != "" || len(c.Scratch) != 0 {
			t.Fatalf("round %d: not reset: %+v", i, c)
		}
		if !c.owned {
			t.Fatalf("round %d: no longer owned after Release", i)
		}
		other := Acquire(&req, &resp)
		if other == c {
			t.Fatalf("round %d: the pool handed out an owned context", i)
		}
		Release(other)
	}
}

// TestPooledCtxIsNotOwned: a context from the pool goes back to it.
func TestPooledCtxIsNotOwned(t *testing.T) {
	c := Acquire(nil, nil)
	if c.owned {
		t.Fatal("a pooled context says it is owned")
	}
	Release(c)
}
