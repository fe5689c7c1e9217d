//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
)

// TestAccessLogRotatesInGateway: a gateway with access_log.max_file_bytes
// rotates its file by size while it serves; logrotate's way (move the
// file, SIGUSR1) still works between rotations; after SIGTERM every
// request is in exactly one file, each file whole JSON lines and within
// the limit.
func TestAccessLogRotatesInGateway(t *testing.T) {
	const maxBytes, n = 8192, 400
	up := testutil.StartQuietUpstream(t, "ok")
	dir := t.TempDir()
	logPath := filepath.Join(dir, "access.log")
	cfg := writeConfig(t, fmt.Sprintf(`watch: false
access_log:
  path: %s
  max_file_bytes: %d
  max_backups: 200
services:
  up: {instances: [{addr: %q}]}
routes:
  - {name: all, match: {prefix: /}, service: up}
`, logPath, maxBytes, up.Addr))
	addr, admin := freePort(t), freePort(t)
	p := startProc(t, addr, admin, []string{"TOLLGATE_ACCESS_LOG=" + logPath}, "run", "-c", cfg)
	send := func(from, to int) {
		for i := from; i < to; i++ {
			if st, _ := testutil.Get(t, fmt.Sprintf("http://%s/r/%04d", addr, i)); st != 200 {
				t.Fatalf("request %d: %d", i, st)
			}
		}
	}
	written := func() float64 { return sumOf(scrape(t, admin), "tollgate_access_log_written_total", nil) }
	send(0, n/2)
	testutil.Eventually(t, 5*time.Second, "the first half logged", func() bool { return written() == n/2 })

	// logrotate: move the file away, then SIGUSR1.
	moved := logPath + "-20260101"
	if err := os.Rename(logPath, moved); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the log reopened", func() bool { return strings.Contains(p.stderr.String(), "access log reopened") })
	send(n/2, n)
	testutil.Eventually(t, 5*time.Second, "every request logged", func() bool { return written() == n })
	fams := scrape(t, admin)
	rotated := sumOf(fams, "tollgate_access_log_rotations_total", map[string]string{"result": "ok"})
	failed := sumOf(fams, "tollgate_access_log_rotations_total", map[string]string{"result": "failed"})
	if dropped := sumOf(fams, "tollgate_access_log_dropped_total", nil); dropped != 0 || failed != 0 || rotated < 10 {
		t.Fatalf("%v rotations, %v failed, %v lines dropped", rotated, failed, dropped)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			t.Fatalf("gateway exit: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("gateway did not stop")
	}

	seen := make([]int, n)
	files, _ := filepath.Glob(logPath + ".*")
	files = append(files, logPath, moved)
	var movedLast int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > maxBytes || len(b) == 0 || b[len(b)-1] != '\n' {
			t.Fatalf("%s: %d bytes", filepath.Base(f), len(b))
		}
		for line := range strings.Lines(string(b)) {
			var v struct{ Path string }
			var i int
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				t.Fatalf("%s: not a whole JSON line: %q", filepath.Base(f), line)
			}
			if _, err := fmt.Sscanf(v.Path, "/r/%04d", &i); err != nil || i < 0 || i >= n {
				t.Fatalf("%s: path %q", filepath.Base(f), v.Path)
			}
			seen[i]++
			if f == moved {
				movedLast = i
			}
		}
	}
	for i, c := range seen {
		if c != 1 {
			t.Fatalf("request %d is in the logs %d times", i, c)
		}
	}
	// Backups are numbered from 1 without a gap, as many as rotations.
	for k := 1; k < len(files)-1; k++ {
		if _, err := os.Stat(fmt.Sprintf("%s.%d", logPath, k)); err != nil {
			t.Fatalf("backups %v: %v", files, err)
		}
	}
	if float64(len(files)-2) != rotated {
		t.Fatalf("%d backups after %v rotations", len(files)-2, rotated)
	}
	if movedLast != n/2-1 {
		t.Fatalf("the moved file ends with request %d, want %d: lines after SIGUSR1 went to it", movedLast, n/2-1)
	}
	t.Logf("%d requests in %d files (%v size rotations, one move and SIGUSR1)", n, len(files), rotated)
}
