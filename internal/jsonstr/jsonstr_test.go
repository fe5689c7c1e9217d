package jsonstr

import (
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzAppendString checks the JSON string encoder against encoding/json:
// valid UTF-8 reads back exactly, and anything makes valid JSON.
func FuzzAppendString(f *testing.F) {
	f.Add([]byte("plain ascii text, long enough for words"))
	f.Add([]byte("quote \" slash \\ nl \n tab \t nul \x00 é 😀 bad \xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		out := Append(nil, b)
		var back string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("%q encoded as invalid JSON %s: %v", b, out, err)
		}
		if utf8.Valid(b) && back != string(b) {
			t.Fatalf("%q read back as %q", b, back)
		}
		if !utf8.Valid(b) && back != strings.ToValidUTF8(string(b), "\ufffd") {
			// Each invalid byte is one U+FFFD, not each run.
			if utf8.RuneCountInString(back) < utf8.RuneCountInString(strings.ToValidUTF8(string(b), "\ufffd")) {
				t.Fatalf("%q read back as %q", b, back)
			}
		}
	})
}

func TestPlainWord(t *testing.T) {
	for _, fill := range []byte{'a', ' ', '~', '!', '#', '[', ']'} {
		for b := range 256 {
			for pos := range 8 {
				var w [8]byte
				for i := range w {
					w[i] = fill
				}
				w[pos] = byte(b)
				want := b >= 0x20 && b < 0x80 && b != '"' && b != '\\'
				if got := plainWord(binary.LittleEndian.Uint64(w[:])); got != want {
					t.Fatalf("%q: got %v, want %v", w, got, want)
				}
			}
		}
	}
}
