package testutil

import (
	"net"
	"testing"
	"time"
)

func TestRedisLifecycle(t *testing.T) {
	r := StartRedis(t)
	if out, err := r.Command("SET", "k", "v"); err != nil || out != "OK" {
		t.Fatalf("SET = %q, %v", out, err)
	}
	if out, err := r.Command("GET", "k"); err != nil || out != "v" {
		t.Fatalf("GET = %q, %v", out, err)
	}
	if out, err := r.Command("GET", "missing"); err != nil || out != "" {
		t.Fatalf("GET missing = %q, %v", out, err)
	}
	if _, err := r.Command("NOSUCHCOMMAND"); err == nil {
		t.Fatal("unknown command: no error")
	}
	if n, err := r.CommandStat("get"); err != nil || n != 2 {
		t.Fatalf("CommandStat(get) = %d, %v; want 2", n, err)
	}

	r.Freeze()
	start := time.Now()
	if _, err := r.Command("PING"); err == nil {
		t.Fatal("PING answered while frozen")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Command on a frozen server took %v", d)
	}
	r.Thaw()
	if out, err := r.Command("PING"); err != nil || out != "PONG" {
		t.Fatalf("PING after thaw = %q, %v", out, err)
	}

	pid := r.PID
	r.Restart()
	if r.PID == pid {
		t.Fatal("Restart kept the pid")
	}
	if out, err := r.Command("GET", "k"); err != nil || out != "" {
		t.Fatalf("GET after restart = %q, %v; want empty (no persistence)", out, err)
	}

	r.Freeze() // cleanup must thaw and kill it
	r.Kill()
	if c, err := net.DialTimeout("tcp", r.Addr, time.Second); err == nil {
		c.Close()
		t.Fatal("server still accepts after Kill")
	}
}
