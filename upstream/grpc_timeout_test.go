package upstream

import (
	"testing"
	"time"
)

// TestGRPCTimeout: grpc-timeout values as the spec writes them; anything
// else, or a value too long to hold, leaves the route's budget alone.
func TestGRPCTimeout(t *testing.T) {
	for v, want := range map[string]time.Duration{"100m": 100 * time.Millisecond, "5S": 5 * time.Second, "2H": 2 * time.Hour, "7n": 7} {
		if d, ok := grpcTimeout([]byte(v)); !ok || d != want {
			t.Fatalf("%s: %v %v", v, d, ok)
		}
	}
	for _, v := range []string{"", "5", "5x", "-1S", "99999999H", "abcS"} {
		if d, ok := grpcTimeout([]byte(v)); ok {
			t.Fatalf("%q read as %v", v, d)
		}
	}
}
