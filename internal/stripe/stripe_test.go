package stripe

import (
	"testing"
	"unsafe"
)

func TestOfWrapsLoopIDs(t *testing.T) {
	for id, want := range map[int]int{0: 0, 1: 1, N - 1: N - 1, N: 0, N + 3: 3, 5*N + 2: 2} {
		if got := Of(id); got != want {
			t.Errorf("Of(%d) = %d, want %d", id, got, want)
		}
	}
}

// TestPadSeparatesCells: the fields of two neighbouring cells are at least
// a cache line apart, whatever the cell's own size.
func TestPadSeparatesCells(t *testing.T) {
	type cell struct {
		a, b uint64
		_    Pad
	}
	var cells [2]cell
	gap := uintptr(unsafe.Pointer(&cells[1].a)) - uintptr(unsafe.Pointer(&cells[0].b))
	if gap < 64 {
		t.Fatalf("cells' fields %d bytes apart, want at least a 64-byte line", gap)
	}
}
