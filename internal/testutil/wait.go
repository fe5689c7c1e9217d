package testutil

import (
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// Eventually polls cond until it holds and returns how long that took,
// failing the test with what when limit passes first. It polls every
// millisecond at first, then less often, so a condition that takes a
// while costs little and one that comes at once is seen at once.
func Eventually(tb testing.TB, limit time.Duration, what string, cond func() bool) time.Duration {
	tb.Helper()
	start := time.Now()
	pause := time.Millisecond
	for !cond() {
		if time.Since(start) > limit {
			tb.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
	return time.Since(start)
}

// Get sends GET url and returns the status and body, failing the test when
// no answer comes within 5 s.
func Get(tb testing.TB, url string) (int, string) {
	tb.Helper()
	status, body, err := fasthttp.GetTimeout(nil, url, 5*time.Second)
	if err != nil {
		tb.Fatalf("GET %s: %v", url, err)
	}
	return status, string(body)
}
