package pipeline

import (
	"testing"

	"github.com/valyala/fasthttp"
)

type slotTicket struct {
	gen   uint64
	armed bool
}

var (
	testTicket = NewSlot[slotTicket]()
	testChoice = NewSlot[int]()
	testRecord = NewSlot[*[]byte]()
)

// TestSlotValuesLastUntilRelease: each slot holds its own value for the
// request, unset ones read as the zero value, and Release resets them all
// while the next request on the same context starts from zero.
func TestSlotValuesLastUntilRelease(t *testing.T) {
	c := NewOwned()
	defer func() { c.owned = false; Release(c) }()
	if got := testChoice.Get(c); got != 0 {
		t.Fatalf("unset slot reads %d, want 0", got)
	}
	buf := []byte("entry")
	testTicket.Set(c, slotTicket{gen: 7, armed: true})
	testChoice.Set(c, 3)
	testRecord.Set(c, &buf)
	if got := testTicket.Get(c); got != (slotTicket{gen: 7, armed: true}) {
		t.Fatalf("ticket = %+v", got)
	}
	if testChoice.Get(c) != 3 || testRecord.Get(c) != &buf {
		t.Fatalf("choice %d, record %p: the slots overlap", testChoice.Get(c), testRecord.Get(c))
	}
	testTicket.Ptr(c).armed = false
	if got := testTicket.Get(c); got.armed || got.gen != 7 {
		t.Fatalf("an update in place was lost: %+v", got)
	}
	testRecord.Clear(c)
	if testRecord.Get(c) != nil || testChoice.Get(c) != 3 {
		t.Fatal("Clear reached another slot or left its own")
	}
	Release(c)
	if testTicket.Get(c) != (slotTicket{}) || testChoice.Get(c) != 0 || testRecord.Get(c) != nil {
		t.Fatal("Release left a slot's value for the next request")
	}
	// The cell kept across Release holds no pointer into the old request.
	if cell := c.slots.cells[testRecord.id].(**[]byte); *cell != nil {
		t.Fatal("Release kept a released request's pointer alive")
	}
}

func BenchmarkSlot(b *testing.B) {
	var req fasthttp.Request
	var resp fasthttp.Response
	buf := []byte("entry")
	c := NewOwned()
	b.ReportAllocs()
	for b.Loop() {
		c.Req, c.Resp = &req, &resp
		testTicket.Set(c, slotTicket{gen: 9, armed: true})
		testChoice.Set(c, 2)
		testRecord.Set(c, &buf)
		_ = testTicket.Get(c).gen + uint64(testChoice.Get(c))
		Release(c)
	}
}
