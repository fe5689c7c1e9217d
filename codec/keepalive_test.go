package codec

import (
	"strings"
	"testing"
	"time"
)

// TestKeepAliveTimeout reads the timeout parameter the way backends write
// it (Node.js "timeout=5", Apache "timeout=5, max=100"), and refuses what
// does not say one number of seconds.
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
		{"timeout=99999999999999999999999", 86400 * time.Second, true},
		{"max=100", 0, false},
		{"", 0, false},
		{"timeout", 0, false},
		{"timeout=", 0, false},
		{"timeout=-1", 0, false},
		{"timeout=1.5", 0, false},
		{"timeout=5s", 0, false},
		{"timeout=5, timeout=50", 0, false},
		{"xtimeout=5", 0, false},
	} {
		got, ok := KeepAliveTimeout([]byte(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("%q: %v %v, want %v %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestAnswerKeepAlive: the common answer's Keep-Alive field is not passed
// on, and its timeout is kept for the pool; an answer without one, or the
// next answer read into the same Answer, has none.
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
	in = "HTTP/1.1 200 OK\r\nDate: x\r\nKeep-Alive: max=10\r\nContent-Length: 2\r\n\r\nok"
	a, _, _, taken, _ = readAnswer(t, strings.NewReader(in), 4096, 0, false)
	if _, ok := a.KeepAlive(); !taken || ok {
		t.Errorf("taken %v, a timeout read from %q", taken, in)
	}
}
