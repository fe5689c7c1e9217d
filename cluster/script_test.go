package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
)

// counterScript adds ARGV[1] to the counter at KEYS[1] and answers the
// new value and a text.
var counterScript = NewScript("counting", `
local n = redis.call('INCRBY', KEYS[1], ARGV[1])
return {n, 'n=' .. n}
`)

func runScripts(t *testing.T, c *Client, s *Script, calls ...ScriptCall) []ScriptReply {
	t.Helper()
	out := make([]ScriptReply, len(calls))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.RunScripts(ctx, s, calls, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRunScriptsLoadsTheScriptWhenMissing: a server without the script (a
// fresh one, or after SCRIPT FLUSH: restarted or failed over) is sent its
// text once per call that missed it; the replies come back as text.
func TestRunScriptsLoadsTheScriptWhenMissing(t *testing.T) {
	rd := testutil.StartRedis(t)
	c := newClient(t, rd.Addr)
	add := func(n string) ScriptCall { return ScriptCall{Keys: []string{"t:{k}"}, Args: []string{n}} }
	if out := runScripts(t, c, counterScript, add("2")); strings.Join(out[0].Values, ",") != "2,n=2" {
		t.Fatalf("first run: %+v", out)
	}
	if _, err := rd.Command("SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	out := runScripts(t, c, counterScript, add("3"), add("5"))
	if strings.Join(out[0].Values, ",") != "5,n=5" || strings.Join(out[1].Values, ",") != "10,n=10" {
		t.Fatalf("after SCRIPT FLUSH: %+v", out)
	}
	// A fresh server had no script either: EVALSHA then EVAL the first
	// time, and both calls again after the flush.
	if n, _ := rd.CommandStat("eval"); n != 3 {
		t.Fatalf("EVAL calls %d, want 3", n)
	}
	if st := c.Stats(); st.Scripts != 6 {
		t.Fatalf("script commands counted %d, want 6", st.Scripts)
	}
	if st := c.Stats(); st.ScriptLatency.Counts == ([len(LatencyBounds) + 1]uint64{}) {
		t.Fatal("script batches not timed")
	}
}

// TestRunScriptsErrorReplyIsPerCall: a script's error reply fails its own
// call only, and does not degrade the client.
func TestRunScriptsErrorReplyIsPerCall(t *testing.T) {
	rd := testutil.StartRedis(t)
	c := newClient(t, rd.Addr)
	if _, err := rd.Command("HSET", "bad:{k}", "f", "x"); err != nil {
		t.Fatal(err)
	}
	out := runScripts(t, c, counterScript,
		ScriptCall{Keys: []string{"bad:{k}"}, Args: []string{"1"}},
		ScriptCall{Keys: []string{"good:{k}"}, Args: []string{"1"}})
	if out[0].Err == nil || !strings.Contains(out[0].Err.Error(), "WRONGTYPE") || !strings.Contains(out[0].Err.Error(), "counting") {
		t.Fatalf("error reply: %+v", out[0])
	}
	if out[1].Err != nil || strings.Join(out[1].Values, ",") != "1,n=1" {
		t.Fatalf("the other call: %+v", out[1])
	}
	if !c.Healthy() {
		t.Fatal("a script error degraded the client")
	}
	scalar := NewScript("scalar", `return redis.call('INCR', KEYS[1])`)
	if out := runScripts(t, c, scalar, ScriptCall{Keys: []string{"s"}}); len(out[0].Values) != 1 || out[0].Values[0] != "1" {
		t.Fatalf("scalar reply: %+v", out)
	}
}

func TestRunScriptsWhileDegraded(t *testing.T) {
	rd := testutil.StartRedis(t)
	c := newClient(t, rd.Addr)
	rd.Kill()
	calls := []ScriptCall{{Keys: []string{"t:{k}"}, Args: []string{"1"}}}
	out := make([]ScriptReply, 1)
	waitFor(t, 3*time.Second, "a failed script batch degrades the client", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		return errors.Is(c.RunScripts(ctx, counterScript, calls, out), ErrDegraded)
	})
	start := time.Now()
	if err := c.RunScripts(context.Background(), counterScript, calls, out); !errors.Is(err, ErrDegraded) || time.Since(start) > 50*time.Millisecond {
		t.Fatalf("scripts while degraded: %v after %v", err, time.Since(start))
	}
}
