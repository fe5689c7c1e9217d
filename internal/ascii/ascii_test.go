package ascii

import "testing"

func TestEqualFold(t *testing.T) {
	for _, tc := range []struct {
		b, s string
		want bool
	}{
		{"Authorization", "authorization", true},
		{"X-App-Key", "x-app-KEY", true},
		{"Bearer", "bearer ", false},
		{"a-b", "a_b", false},  // '-'|0x20 == '-' but '_'|0x20 != '-'
		{"@", "`", false},      // differ only in bit 0x20, not letters
		{"\u212a", "k", false}, // no Unicode folding
		{"http://", "HTTP://", true},
	} {
		if got := EqualFold([]byte(tc.b), tc.s); got != tc.want {
			t.Errorf("EqualFold(%q, %q) = %v", tc.b, tc.s, got)
		}
	}
	if !HasPrefixFold([]byte("HTTPS://x"), "https://") || HasPrefixFold([]byte("htt"), "http") {
		t.Fatal("HasPrefixFold")
	}
}

func TestAppendLower(t *testing.T) {
	if got := string(AppendLower([]byte("x:"), []byte("X-Forwarded-For \u212a@[`"))); got != "x:x-forwarded-for \u212a@[`" {
		t.Fatalf("AppendLower: %q", got)
	}
}
