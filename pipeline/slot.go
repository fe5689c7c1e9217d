package pipeline

import (
	"fmt"
	"math/bits"
	"sync"
)

// maxSlots bounds how many slots the features of one binary may declare.
// The set of slots in use is a bit mask, so it cannot pass 64; 32 leaves
// room for many more features than the gateway has.
const maxSlots = 32

// Slot is a per-request value of type T that a feature keeps on the Ctx
// without Ctx naming it: the feature declares its slot once, at package
// init, and only code that holds the slot reads or writes the value. A
// new feature's per-request state is then a line in its own package, not
// a field every other package recompiles and reviews.
//
//	var admission = pipeline.NewSlot[ticket]()
//	admission.Set(c, ticket{gen: g})
//	t := admission.Get(c)
//
// The value lives in a cell the Ctx keeps from one request to the next
// (made the first time the Ctx holds a value of that slot), so Get and Set
// allocate nothing in steady state, whatever T is: a T is never boxed per
// request. Release sets every value back to T's zero value; Get before any
// Set in a request returns the zero value.
type Slot[T any] struct {
	id uint8
}

var (
	slotsMu sync.Mutex
	// slotCount is how many slots are declared; slotZero[i] sets slot i's
	// cell back to the zero value (it knows the cell's type, Release does
	// not).
	slotCount int
	slotZero  [maxSlots]func(cell any)
)

// NewSlot declares a slot; call it once per slot, at package init (a var
// declaration). It panics past maxSlots, which only a new feature can hit,
// at start-up.
func NewSlot[T any]() Slot[T] {
	slotsMu.Lock()
	defer slotsMu.Unlock()
	if slotCount == maxSlots {
		panic(fmt.Sprintf("pipeline: more than %d request slots declared", maxSlots))
	}
	id := slotCount
	slotCount++
	slotZero[id] = func(cell any) {
		var zero T
		*cell.(*T) = zero
	}
	return Slot[T]{id: uint8(id)}
}

// slotCells are a Ctx's slot values: cells[i] is a *T for slot i, made the
// first time this Ctx held a value of it and kept across requests; set
// marks the slots given a value since the last Release.
type slotCells struct {
	cells [maxSlots]any
	set   uint64
}

// Get returns the request's value, the zero value when none was set.
func (s Slot[T]) Get(c *Ctx) T {
	if sc := c.slots; sc != nil && sc.set&(1<<s.id) != 0 {
		return *sc.cells[s.id].(*T)
	}
	var zero T
	return zero
}

// Set gives the request's value; it lasts until Release.
func (s Slot[T]) Set(c *Ctx, v T) {
	*s.Ptr(c) = v
}

// Ptr returns the request's value in place, for a feature that updates a
// value larger than a word; it counts as set from then until Release.
func (s Slot[T]) Ptr(c *Ctx) *T {
	sc := c.slots
	if sc == nil {
		sc = new(slotCells)
		c.slots = sc
	}
	cell, _ := sc.cells[s.id].(*T)
	if cell == nil {
		cell = new(T)
		sc.cells[s.id] = cell
	}
	sc.set |= 1 << s.id
	return cell
}

// Clear sets the request's value back to the zero value before Release
// would (a value handed on, which must not be handed on twice).
func (s Slot[T]) Clear(c *Ctx) {
	sc := c.slots
	if sc == nil || sc.set&(1<<s.id) == 0 {
		return
	}
	slotZero[s.id](sc.cells[s.id])
	sc.set &^= 1 << s.id
}

// reset sets every value given in the request back to its zero value,
// keeping the cells.
func (sc *slotCells) reset() {
	for m := sc.set; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		slotZero[i](sc.cells[i])
	}
	sc.set = 0
}
