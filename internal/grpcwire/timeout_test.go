package grpcwire

import (
	"testing"
	"time"
)

// TestParseTimeout: grpc-timeout values as the spec writes them; anything
// else, or a value too long to hold, is not a timeout.
func TestParseTimeout(t *testing.T) {
	for v, want := range map[string]time.Duration{"100m": 100 * time.Millisecond, "5S": 5 * time.Second, "2H": 2 * time.Hour, "7n": 7} {
		if d, ok := ParseTimeout([]byte(v)); !ok || d != want {
			t.Fatalf("%s: %v %v", v, d, ok)
		}
	}
	for _, v := range []string{"", "5", "5x", "-1S", "99999999H", "abcS"} {
		if d, ok := ParseTimeout([]byte(v)); ok {
			t.Fatalf("%q read as %v", v, d)
		}
	}
}

// TestAppendTimeout: what is written reads back, to the millisecond
// (at least one), or to the second past eight digits of them.
func TestAppendTimeout(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "1m", 1500 * time.Microsecond: "1m", 400 * time.Millisecond: "400m",
		30 * time.Hour: "108000S", 1e6 * time.Hour: "99999999S"} {
		got := string(AppendTimeout(nil, d))
		if got != want {
			t.Fatalf("%v written %q, want %q", d, got, want)
		}
		if _, ok := ParseTimeout([]byte(got)); !ok {
			t.Fatalf("%q does not read back", got)
		}
	}
}
