package testutil

import (
	"net"
	"testing"
	"time"
)

// TestJaegerFreezeAndRestart: the helper's Jaeger answers, stops
// answering while frozen, and comes back on the same ports.
func TestJaegerFreezeAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Jaeger")
	}
	j := StartJaeger(t)
	if j.Trace(t, "4bf92f3577b34da6a3ce929d0e0e4736") != nil {
		t.Fatal("an empty Jaeger has a trace")
	}
	j.Freeze()
	// SIGSTOP reaches every thread of the process, not at the same
	// instant: one may still answer a request sent at once.
	time.Sleep(100 * time.Millisecond)
	if j.ready() {
		t.Fatal("a frozen Jaeger answered")
	}
	j.Thaw()
	addr := j.OTLPGRPC
	j.Restart()
	if j.OTLPGRPC != addr || !j.ready() {
		t.Fatal("Jaeger did not come back on its ports")
	}
	c, err := net.DialTimeout("tcp", j.OTLPHTTP, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}
