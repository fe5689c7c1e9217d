package sign

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// FuzzAgree checks that the client functions and the Verifier agree on any
// input: the same signing string and signature, or the same error. Neither
// may panic.
func FuzzAgree(f *testing.F) {
	for _, tc := range vectors {
		f.Add(tc.query, tc.form, testTS, testNonce, "k")
	}
	f.Add("a=%zz", "", "1", "n", "")
	f.Add("a=%e4%bd", "b=%ED%A0%80", "", "", "s")
	f.Add("%F0%9F%98%80=1&%EE%80%80=2", "%EE%80%80=3&%F0%9F%98%80=4", "1", "n", "s")
	v := new(Verifier)
	f.Fuzz(func(t *testing.T, query, form, ts, nonce, secret string) {
		want, werr := StringToSign(query, form, ts, nonce)
		got, gerr := v.Append(nil, []byte(query), []byte(form), []byte(ts), []byte(nonce))
		if werr != nil || gerr != nil {
			if gerr == nil || !errors.Is(werr, gerr) {
				t.Fatalf("errors differ: client %v, verifier %v", werr, gerr)
			}
			if key, cut := v.RepeatedKey(); gerr == ErrRepeated && !cut && !strings.Contains(werr.Error(), strconv.Quote(string(key))) {
				t.Fatalf("repeated keys differ: client %v, verifier %q", werr, key)
			}
			if v.Check([]byte(secret), []byte(query), []byte(form), []byte(ts), []byte(nonce), make([]byte, SignatureLen)) {
				t.Fatal("Check accepted unusable parameters")
			}
			return
		}
		if string(got) != want {
			t.Fatalf("signing strings differ:\nclient   %q\nverifier %q", want, got)
		}
		sig, err := Sign(secret, query, form, ts, nonce)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Verify([]byte(secret), []byte(query), []byte(form), []byte(ts), []byte(nonce), []byte(sig)); err != nil {
			t.Fatalf("Verify(Sign(...)) = %v", err)
		}
	})
}

// FuzzCompareKeys checks compareKeys against a plain comparison of UTF-16
// code units.
func FuzzCompareKeys(f *testing.F) {
	f.Add("a", "b")
	f.Add("k\uE000", "k\U0001F600")
	f.Add("\uFFFF", "\U00010000")
	f.Fuzz(func(t *testing.T, a, b string) {
		if !utf8.ValidString(a) || !utf8.ValidString(b) {
			return
		}
		want := slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		got := compareKeys([]byte(a), []byte(b))
		if sgn(got) != want {
			t.Fatalf("compareKeys(%q, %q) = %d; want sign %d", a, b, got, want)
		}
	})
}

func sgn(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}
