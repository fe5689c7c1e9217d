package observe

import (
	"bufio"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
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
