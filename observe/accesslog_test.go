package observe

import (
	"bufio"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

func TestAccessLogWritesOneJSONLinePerRequest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	l, err := OpenAccessLog(path, 1024, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				var req fasthttp.Request
				var resp fasthttp.Response
				req.SetRequestURI("/api/x")
				req.Header.SetMethod("POST")
				resp.SetStatusCode(200 + i)
				c := pipeline.AcquireParsed(&req, &resp)
				c.Start = time.Now().Add(-time.Millisecond)
				c.ClientIP = netip.MustParseAddr("203.0.113.9")
				c.RouteName = "r"
				c.Outcome.Instance = "127.0.0.1:9001"
				StartTrace(c)
				l.Record(c, time.Now())
				pipeline.Release(c)
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %d is not JSON: %v: %s", n, err, sc.Text())
		}
		for _, k := range []string{"time", "traceId", "spanId", "method", "path", "route", "status", "upstream", "totalMs", "node", "client"} {
			if _, ok := line[k]; !ok {
				t.Fatalf("line lacks %s: %s", k, sc.Text())
			}
		}
		if line["path"] != "/api/x" || line["node"] != "node-a" || line["client"] != "203.0.113.9" {
			t.Fatalf("fields: %s", sc.Text())
		}
		n++
	}
	if n != 200 || l.Written() != 200 || l.Dropped() != 0 {
		t.Fatalf("%d lines, written %d, dropped %d; want 200, 200, 0", n, l.Written(), l.Dropped())
	}
	// Recording after Close is harmless.
	var req fasthttp.Request
	var resp fasthttp.Response
	c := pipeline.AcquireParsed(&req, &resp)
	l.Record(c, time.Now())
	pipeline.Release(c)
}

func TestAccessLogDropsWhenFull(t *testing.T) {
	l, err := OpenAccessLog(filepath.Join(t.TempDir(), "a.log"), 1, "n")
	if err != nil {
		t.Fatal(err)
	}
	var req fasthttp.Request
	var resp fasthttp.Response
	for range 10000 {
		c := pipeline.AcquireParsed(&req, &resp)
		l.Record(c, time.Now())
		pipeline.Release(c)
	}
	_ = l.Close()
	if l.Dropped() == 0 || l.Dropped()+l.Written() != 10000 {
		t.Fatalf("written %d dropped %d of 10000", l.Written(), l.Dropped())
	}
}

func TestAccessLogFieldsAndReopen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	l, err := OpenAccessLog(path, 64, "node-b")
	if err != nil {
		t.Fatal(err)
	}
	record := func(user string) {
		var req fasthttp.Request
		var resp fasthttp.Response
		req.SetRequestURI("/pay")
		resp.SetStatusCode(429)
		c := pipeline.AcquireParsed(&req, &resp)
		c.Start = time.Now()
		c.RouteName = "pay"
		c.Consumer = "app-1"
		c.UserID = user
		c.Decision = "rate limited"
		c.BytesIn = 321
		c.Outcome = pipeline.Outcome{Service: "pay-v1", Instance: "127.0.0.1:9", Latency: 2 * time.Millisecond, Result: pipeline.ResultOK, Attempts: 1}
		StartTrace(c)
		l.Record(c, time.Now())
		pipeline.Release(c)
	}
	record("user-0042-abcdef")
	waitWritten := func(n uint64) {
		deadline := time.Now().Add(5 * time.Second)
		for l.Written() < n && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitWritten(1)
	// logrotate moves the file away, then signals; the next lines go to a
	// new file at the same path.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the buffered writer's flush interval
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	record("abc")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(path + ".1")
	if err != nil {
		t.Fatal(err)
	}
	cur, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	if err := json.Unmarshal(old, &line); err != nil {
		t.Fatalf("rotated file: %v %q", err, old)
	}
	want := map[string]any{"consumer": "app-1", "userId": "us***ef", "service": "pay-v1", "upstream": "127.0.0.1:9",
		"decision": "rate limited", "node": "node-b", "route": "pay", "bytesIn": 321.0, "status": 429.0}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("%s = %v, want %v (%s)", k, line[k], v, old)
		}
	}
	if strings.Contains(string(old), "user-0042") {
		t.Fatal("the user id was logged in the clear")
	}
	if err := json.Unmarshal(cur, &line); err != nil || line["userId"] != "***" {
		t.Fatalf("line after reopen: %v %s", err, cur)
	}
}

// TestAccessLogShowsRefusedTargets: a request refused before it had a
// canonical path is logged with its target as sent.
func TestAccessLogShowsRefusedTargets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	l, err := OpenAccessLog(path, 16, "n")
	if err != nil {
		t.Fatal(err)
	}
	var req fasthttp.Request
	var resp fasthttp.Response
	req.SetRequestURI("/a/%252e%252e/admin")
	resp.SetStatusCode(400)
	c := pipeline.Acquire(&req, &resp) // no target: the refusal came first
	c.Start = time.Now()
	l.Record(c, time.Now())
	pipeline.Release(c)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	if err := json.Unmarshal(b, &line); err != nil || line["path"] != "/a/%252e%252e/admin" {
		t.Fatalf("%v: %s", err, b)
	}
}
