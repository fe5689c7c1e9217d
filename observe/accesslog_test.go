package observe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/trace"
	"github.com/valyala/fasthttp"
)

func TestAccessLogWritesOneJSONLinePerRequest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	l, err := OpenAccessLog(AccessLogOptions{Path: path, Buffer: 1024, Node: "node-a"})
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
				trace.Begin(&c.Trace, &c.Received, &c.Req.Header)
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
	l, err := OpenAccessLog(AccessLogOptions{Path: filepath.Join(t.TempDir(), "a.log"), Buffer: 1, Node: "n"})
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

// TestAccessLogWriterRestsUnderLoad: under a steady stream of lines the
// writer takes them a rest's worth at a time, so the requests that queue
// them seldom wake it; every line is still written, in order.
func TestAccessLogWriterRestsUnderLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.log")
	l, err := OpenAccessLog(AccessLogOptions{Path: path, Node: "n"})
	if err != nil {
		t.Fatal(err)
	}
	var req fasthttp.Request
	var resp fasthttp.Response
	const lines = 2000
	for i := range lines {
		req.Header.SetRequestURI("/line/" + strconv.Itoa(i))
		c := pipeline.AcquireParsed(&req, &resp)
		l.Record(c, time.Now())
		pipeline.Release(c)
		// A line every 50 µs: longer than the writer takes to write one,
		// so a writer waiting on the queue would be woken by each.
		for at := time.Now(); time.Since(at) < 50*time.Microsecond; {
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l.Written() != lines || l.Dropped() != 0 {
		t.Fatalf("written %d dropped %d of %d", l.Written(), l.Dropped(), lines)
	}
	// Resting, it is woken by the first line after an idle spell only.
	if w := l.wakes.Load(); w > lines/10 {
		t.Errorf("the writer was woken by a line %d times for %d lines", w, lines)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if want := `"path":"/line/` + strconv.Itoa(i) + `"`; !bytes.Contains(line, []byte(want)) {
			t.Fatalf("line %d: %s, want %s", i, line, want)
		}
	}
}

func TestAccessLogFieldsAndReopen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	l, err := OpenAccessLog(AccessLogOptions{Path: path, Buffer: 64, Node: "node-b"})
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
		trace.Begin(&c.Trace, &c.Received, &c.Req.Header)
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
	// No wait for a flush: lines written before the reopen go to the old
	// file.
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
	l, err := OpenAccessLog(AccessLogOptions{Path: path, Buffer: 16, Node: "n"})
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

// recordSeq logs a request whose path carries who and seq, padded to a
// length that varies with seq, so lines differ in size.
func recordSeq(l *AccessLog, who, seq int) {
	var req fasthttp.Request
	var resp fasthttp.Response
	req.SetRequestURI(fmt.Sprintf("/w%d/%06d/%s", who, seq, strings.Repeat("x", seq*37%300)))
	resp.SetStatusCode(200)
	c := pipeline.AcquireParsed(&req, &resp)
	c.Start = time.Now()
	c.RouteName = "r"
	trace.Begin(&c.Trace, &c.Received, &c.Req.Header)
	l.Record(c, time.Now())
	pipeline.Release(c)
}

// logLine is one line's writer and sequence number.
type logLine struct{ who, seq int }

// readLog parses every line of file (each must be whole JSON) and reports
// the file's size.
func readLog(t *testing.T, file string) ([]logLine, int64) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Fatalf("%s ends inside a line", filepath.Base(file))
	}
	var out []logLine
	for line := range strings.Lines(string(b)) {
		var v struct{ Path string }
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("%s: a line is not JSON (split?): %v: %q", filepath.Base(file), err, line)
		}
		var ll logLine
		if _, err := fmt.Sscanf(v.Path, "/w%d/%06d/", &ll.who, &ll.seq); err != nil {
			t.Fatalf("path %q: %v", v.Path, err)
		}
		out = append(out, ll)
	}
	return out, int64(len(b))
}

// backups lists path.1, path.2, … as long as they exist, and fails if a
// file beyond them exists too (a gap in the numbering).
func backupFiles(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for n := 1; ; n++ {
		name := fmt.Sprintf("%s.%d", path, n)
		if _, err := os.Stat(name); err != nil {
			matches, _ := filepath.Glob(path + ".*")
			if len(matches) != len(out) {
				t.Fatalf("backups %v: not numbered 1..%d", matches, len(out))
			}
			return out
		}
		out = append(out, name)
	}
}

// TestAccessLogRotatesBySize: four writers log while the file rotates
// many times and Reopen runs meanwhile. Every line is in exactly one file,
// whole; each writer's lines are in order from the oldest backup to the
// current file; no file is larger than the limit, and each backup was
// rotated only when the next line would not have fitted.
func TestAccessLogRotatesBySize(t *testing.T) {
	const maxBytes, writers, perWriter = 8192, 4, 150
	path := filepath.Join(t.TempDir(), "access.log")
	l, err := OpenAccessLog(AccessLogOptions{Path: path, Buffer: writers * perWriter, Node: "n", MaxFileBytes: maxBytes, MaxBackups: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				recordSeq(l, w, i)
			}
		}()
	}
	// Reopen (SIGUSR1) runs again and again while the writer works.
	reopens := 0
	deadline := time.Now().Add(10 * time.Second)
	for l.Written() < writers*perWriter {
		if time.Now().After(deadline) {
			t.Fatalf("%d lines written of %d", l.Written(), writers*perWriter)
		}
		if err := l.Reopen(); err != nil {
			t.Fatal(err)
		}
		reopens++
	}
	wg.Wait()
	t.Logf("%d reopens while writing", reopens)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l.Written() != writers*perWriter || l.Dropped() != 0 {
		t.Fatalf("written %d dropped %d", l.Written(), l.Dropped())
	}
	files := backupFiles(t, path)
	slices.Reverse(files) // oldest first
	files = append(files, path)
	done, failed := l.Rotations()
	if int(done) != len(files)-1 || failed != 0 || done < 10 {
		t.Fatalf("%d rotations (%d failed) for %d files; want at least 10", done, failed, len(files))
	}
	next := make([]int, writers)
	type sized struct {
		name string
		size int64
	}
	var sizes []sized
	for _, f := range files {
		lines, size := readLog(t, f)
		if size > maxBytes || len(lines) == 0 {
			t.Fatalf("%s: %d bytes, %d lines", filepath.Base(f), size, len(lines))
		}
		for _, ll := range lines {
			if ll.seq != next[ll.who] {
				t.Fatalf("%s: writer %d line %d, want %d (lost, repeated or out of order)", filepath.Base(f), ll.who, ll.seq, next[ll.who])
			}
			next[ll.who]++
		}
		sizes = append(sizes, sized{f, size})
	}
	for w, n := range next {
		if n != perWriter {
			t.Fatalf("writer %d: %d of %d lines found", w, n, perWriter)
		}
	}
	// A backup was rotated because the next line did not fit: it is
	// within one line of the limit (lines here are under 1 KiB).
	for _, s := range sizes[:len(sizes)-1] {
		if s.size <= maxBytes-1024 {
			t.Fatalf("%s rotated at %d bytes, limit %d", filepath.Base(s.name), s.size, maxBytes)
		}
	}
	t.Logf("%d files of at most %d bytes", len(files), maxBytes)
}

// TestAccessLogKeepsMaxBackups: rotation keeps MaxBackups files, the
// newest lines, in order; an external rotation (the file moved away, then
// Reopen, as logrotate and SIGUSR1 do) still works between size
// rotations, and rotation counts a file that existed before the start.
func TestAccessLogKeepsMaxBackups(t *testing.T) {
	const maxBytes, backups = 4096, 3
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	// A file from an earlier run: appended to, and its bytes count.
	earlier := strings.Repeat("x", maxBytes-100) + "\n"
	if err := os.WriteFile(path, []byte(earlier), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := OpenAccessLog(AccessLogOptions{Path: path, Buffer: 1000, Node: "n", MaxFileBytes: maxBytes, MaxBackups: backups})
	if err != nil {
		t.Fatal(err)
	}
	recordSeq(l, 0, 0)
	waitFor := func(n uint64) {
		deadline := time.Now().Add(5 * time.Second)
		for l.Written() < n && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	waitFor(1)
	if err := l.Reopen(); err != nil { // flushes
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path + ".1"); err != nil || string(b) != earlier {
		t.Fatalf("the earlier file was not rotated before the first line: %v", err)
	}
	for i := 1; i < 100; i++ {
		recordSeq(l, 0, i)
	}
	waitFor(100)
	// logrotate: move the file away, signal.
	moved := path + "-20260101"
	if err := os.Rename(path, moved); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	for i := 100; i < 200; i++ {
		recordSeq(l, 0, i)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files := backupFiles(t, path)
	if len(files) != backups {
		t.Fatalf("%d backups, want %d", len(files), backups)
	}
	slices.Reverse(files)
	var seqs []int
	for _, f := range append(files, path) {
		lines, size := readLog(t, f)
		if size > maxBytes {
			t.Fatalf("%s: %d bytes", f, size)
		}
		for _, ll := range lines {
			seqs = append(seqs, ll.seq)
		}
	}
	// The kept files hold the newest lines, each once, in order, up to
	// the last.
	for i, s := range seqs {
		if s != 200-len(seqs)+i {
			t.Fatalf("kept lines %v: not the newest in order", seqs)
		}
	}
	// The moved file got every line written before the reopen and none
	// after: it ends with line 99.
	old, _ := readLog(t, moved)
	if len(old) == 0 || old[len(old)-1].seq != 99 {
		t.Fatalf("moved file holds %v, want lines up to 99", old)
	}
	if done, _ := l.Rotations(); done < 10 {
		t.Fatalf("%d rotations", done)
	}
}
