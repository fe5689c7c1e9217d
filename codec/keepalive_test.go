package codec

import (
	"strings"
	"testing"
	"time"
)

// TestKeepAliveTimeout reads the timeout parameter the way backends write
// it (Node.js "timeout=5", Apache "timeout=5, max=100"), refuses what does
// not say a number of seconds, and of two timeouts takes the shorter.
func TestKeepAliveTimeout(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"timeout=5", 5 * time.Second, true},
		{"timeout=5, max=100", 5 * time.Second, true},
		{"max=100, Timeout=15", 15 * time.Second, true},
		{" TIMEOUT = 2 ,max=1", 2 * time.Second, true},
		{`timeout="7"`, 7 * time.Second, true},
		{"timeout=0", 0, true},
		{"timeout=999999", 86400 * time.Second, true},
		{"timeout=9999999999999999", 0, false}, // more digits than any timeout has
		{"max=100", 0, false},
		{"", 0, false},
		{"timeout", 0, false},
		{"timeout=", 0, false},
		{"timeout=-1", 0, false},
		{"timeout=1.5", 0, false},
		{"timeout=5s", 0, false},
		{"timeout=50, timeout=5", 5 * time.Second, true},
		{"timeout=5, timeout=x", 5 * time.Second, true},
		{"xtimeout=5", 0, false},
	} {
		got, ok := KeepAliveTimeout([]byte(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("%q: %v %v, want %v %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestAnswerKeepAlive: the common answer's Keep-Alive field is not passed
// on, and its timeout is kept for the pool (the shorter of two fields); an
// answer without one, or the next answer read into the same Answer, has
// none.
func TestAnswerKeepAlive(t *testing.T) {
	in := "HTTP/1.1 200 OK\r\nDate: x\r\nKeep-Alive: timeout=5, max=1000\r\nContent-Length: 2\r\n\r\nok"
	a, resp, _, taken, err := readAnswer(t, strings.NewReader(in), 4096, 0, false)
	if !taken || err != nil {
		t.Fatalf("taken %v, err %v", taken, err)
	}
	if d, ok := a.KeepAlive(); d != 5*time.Second || !ok {
		t.Errorf("KeepAlive() = %v %v, want 5s", d, ok)
	}
	if got, want := written(a, resp, false, false, false), "HTTP/1.1 200 OK\r\nDate: x\r\nContent-Length: 2\r\n\r\nok"; got != want {
		t.Errorf("written: %q", got)
	}
	a.Reset()
	if _, ok := a.KeepAlive(); ok {
		t.Error("a reset answer still has a timeout")
	}
	// Two fields: the shorter timeout, whichever comes first.
	for _, fields := range []string{"Keep-Alive: timeout=60\r\nkeep-alive: timeout=3\r\n", "KEEP-ALIVE: timeout=3\r\nKeep-Alive: timeout=60\r\n"} {
		in = "HTTP/1.1 200 OK\r\nDate: x\r\n" + fields + "Content-Length: 2\r\n\r\nok"
		a, _, _, taken, _ = readAnswer(t, strings.NewReader(in), 4096, 0, false)
		if d, ok := a.KeepAlive(); !taken || d != 3*time.Second || !ok {
			t.Errorf("%q: taken %v, KeepAlive() = %v %v, want 3s", fields, taken, d, ok)
		}
	}
	in = "HTTP/1.1 200 OK\r\nDate: x\r\nKeep-Alive: max=10\r\nContent-Length: 2\r\n\r\nok"
	a, _, _, taken, _ = readAnswer(t, strings.NewReader(in), 4096, 0, false)
	if _, ok := a.KeepAlive(); !taken || ok {
		t.Errorf("taken %v, a timeout read from %q", taken, in)
	}
}

// TestKeepAliveTimeoutAllocs: reading the timeout, on every answer that
// carries the field, allocates nothing.
func TestKeepAliveTimeoutAllocs(t *testing.T) {
	v := []byte("timeout=5, max=100")
	if n := testing.AllocsPerRun(100, func() { KeepAliveTimeout(v) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
