package record

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
)

// testEntry is a record of about size bytes once encoded.
func testEntry(n, size int) *entry {
	e := entryPool.Get().(*entry)
	e.at = time.Unix(1700000000, int64(n))
	e.route = "r"
	e.method = append(e.method[:0], "GET"...)
	e.host = append(e.host[:0], "h"...)
	e.target = append(e.target[:0], "/n/"+itoa(n)...)
	e.reqHeaders, e.respHeaders = e.reqHeaders[:0], e.respHeaders[:0]
	e.reqBody = append(e.reqBody[:0], strings.Repeat("x", max(size-200, 0))...)
	e.respBody, e.req, e.resp, e.status = e.respBody[:0], bodyState{}, bodyState{}, 200
	return e
}

// files lists the recording files of dir, oldest first.
func files(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, filePrefix+"*"+fileSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// readAll returns the targets of every record in the files, in order.
func readAll(t *testing.T, names []string) []string {
	t.Helper()
	var out []string
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := Scan(bytes.NewReader(b), func(_ int, e *Entry, err error) error {
			if err == nil {
				out = append(out, e.Target)
			}
			return err
		}); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
	}
	return out
}

func TestWriterRotatesBySizeAndKeepsMaxFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec")
	w := newWriter(Settings{Dir: dir, MaxFileBytes: 4096, MaxFiles: 3}.withDefaults(), nil, time.Now)
	for n := range 40 {
		if !w.enqueue(testEntry(n, 1000)) {
			t.Fatal("queue full")
		}
	}
	w.Close()
	names := files(t, dir)
	if len(names) != 3 {
		t.Fatalf("%d files kept, want 3: %v", len(names), names)
	}
	for _, n := range names {
		if st, _ := os.Stat(n); st.Size() > 4096 {
			t.Errorf("%s is %d bytes, over max_file_bytes", n, st.Size())
		}
	}
	got := readAll(t, names)
	if len(got) == 0 || got[len(got)-1] != "/n/39" {
		t.Fatalf("the newest records are missing: %v", got)
	}
	// What is kept is the end of the sequence, whole lines, in order.
	first := 40 - len(got)
	for i, target := range got {
		if target != "/n/"+itoa(first+i) {
			t.Fatalf("record %d is %s, want /n/%d", i, target, first+i)
		}
	}
	st := w.Stats()
	if st.Written != 40 || st.Failed != 0 || st.Rotations == 0 || st.Files != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestWriterRotatesByAge(t *testing.T) {
	dir := t.TempDir()
	var now atomic.Int64
	now.Store(time.Unix(1700000000, 0).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	w := newWriter(Settings{Dir: dir, MaxFileAge: time.Minute}.withDefaults(), nil, clock)
	defer w.Close()
	w.enqueue(testEntry(1, 300))
	testutil.Eventually(t, 5*time.Second, "the first file", func() bool { return len(files(t, dir)) == 1 })
	now.Add(int64(59 * time.Second))
	time.Sleep(3 * flushEvery)
	if w.Stats().Rotations != 0 {
		t.Fatal("rotated before max_file_age")
	}
	now.Add(int64(2 * time.Second))
	testutil.Eventually(t, 5*time.Second, "rotation by age", func() bool { return w.Stats().Rotations == 1 })
	w.enqueue(testEntry(2, 300))
	w.Close()
	if got := readAll(t, files(t, dir)); strings.Join(got, ",") != "/n/1,/n/2" {
		t.Fatalf("records %v", got)
	}
}

func TestWriterCountsFailures(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	w := newWriter(Settings{Dir: filepath.Join(blocker, "rec")}.withDefaults(), nil, time.Now)
	for n := range 5 {
		w.enqueue(testEntry(n, 300))
	}
	w.Close()
	if st := w.Stats(); st.Failed != 5 || st.Written != 0 {
		t.Fatalf("a directory that cannot be made: %+v", st)
	}
}

// stalledFile is a file whose writes block until released.
type stalledFile struct{ release chan struct{} }

func (f stalledFile) Write(p []byte) (int, error) {
	<-f.release
	return len(p), nil
}
func (f stalledFile) Close() error { return nil }

// stallWriter makes every writer opened from now until the test ends block
// on its first write; releasing lets them go on.
func stallWriter(t testing.TB) (release func()) {
	ch := make(chan struct{})
	old := openFile
	openFile = func(string) (io.WriteCloser, error) { return stalledFile{ch}, nil }
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(func() {
		release()
		openFile = old
	})
	return release
}

func TestWriterFullQueueDrops(t *testing.T) {
	release := stallWriter(t)
	w := newWriter(Settings{Dir: t.TempDir(), Queue: 4}.withDefaults(), nil, time.Now)
	// The writer takes a record and sticks in its first flush; four more
	// fill the queue; the rest are dropped at once.
	accepted := 0
	start := time.Now()
	for n := range 100 {
		if w.enqueue(testEntry(n, bufferBytes)) {
			accepted++
		}
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("enqueueing on a stalled writer took %v", took)
	}
	if accepted > 6 || w.Stats().Dropped != uint64(100-accepted) {
		t.Fatalf("accepted %d, stats %+v", accepted, w.Stats())
	}
	release()
	w.Close()
}
