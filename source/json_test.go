package source

import (
	"encoding/binary"
	"testing"
)

// TestHasStrSpecial checks the word-at-a-time test against the byte table
// for every byte value in every position, and beside other bytes that
// could borrow into it.
func TestHasStrSpecial(t *testing.T) {
	for _, fill := range []byte{'a', 0x7f, 0x80, 0xff, ' ', '!', '#', '[', ']'} {
		for b := range 256 {
			for pos := range 8 {
				var w [8]byte
				for i := range w {
					w[i] = fill
				}
				w[pos] = byte(b)
				want := strSpecial[b] || strSpecial[fill]
				if got := hasStrSpecial(binary.LittleEndian.Uint64(w[:])); got != want {
					t.Fatalf("%q: got %v, want %v", w, got, want)
				}
			}
		}
	}
}
