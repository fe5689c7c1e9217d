package record

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/internal/pacer"
	"go.uber.org/zap"
)

// Writer owns a recording directory: the routes' record rules hand it
// finished records through a bounded queue, and one goroutine encodes them
// as JSON lines into files it starts afresh by size and by age, deleting
// the oldest beyond max_files. The request path never waits for it: when
// the queue is full a record is dropped and counted.
//
// The directory and the first file are made when the first record arrives,
// so checking a configuration touches no disk.
type Writer struct {
	set      Settings
	log      *zap.Logger
	now      func() time.Time
	openFile func(name string) (io.WriteCloser, error) // the package's openFile when the writer started
	queue    chan *entry

	// Figures, read by reports while the goroutine works.
	written, failed, dropped, rotations atomic.Uint64
	files                               atomic.Int64

	stop, done chan struct{}
	once       sync.Once

	// The goroutine's own state.
	f        io.WriteCloser
	name     string
	opened   time.Time
	size     int64
	buf      []byte
	pending  uint64 // lines in buf
	line     []byte
	retryAt  time.Time
	lastWarn time.Time
}

// openFile creates a recording file; it fails if the name is taken. Tests
// replace it to stall the writers they start; each writer reads it once,
// when it starts, so a writer left running by an earlier test never reads
// it while a later test writes it.
var openFile = func(name string) (io.WriteCloser, error) {
	return os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o640)
}

const (
	// flushEvery bounds how long a record may sit in the writer's buffer.
	flushEvery = 200 * time.Millisecond
	// bufferBytes is how many bytes of whole lines are gathered before
	// they are written out.
	bufferBytes = 256 << 10
	// retryOpen spaces the attempts to open a file after one failed.
	retryOpen  = time.Second
	filePrefix = "record-"
	fileSuffix = ".jsonl"
)

// newWriter starts the writer of s (defaults applied, valid).
func newWriter(s Settings, log *zap.Logger, now func() time.Time) *Writer {
	if log == nil {
		log = zap.NewNop()
	}
	w := &Writer{set: s, log: log, now: now, openFile: openFile, queue: make(chan *entry, s.Queue),
		stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// enqueue hands e to the writer, or reports that the queue is full (e is
// then the caller's to release).
func (w *Writer) enqueue(e *entry) bool {
	select {
	case w.queue <- e:
		return true
	default:
		w.dropped.Add(1)
		return false
	}
}

// closeWait bounds how long Close waits for the writer: a disk that hangs
// must not hold up the process's exit.
const closeWait = 5 * time.Second

// Close writes what is queued, flushes and closes the file, waiting at
// most closeWait for it. Records handed over afterwards are never written.
func (w *Writer) Close() {
	w.once.Do(func() {
		close(w.stop)
		select {
		case <-w.done:
		case <-time.After(closeWait):
			w.log.Warn("the recording writer did not finish in time; records still queued are lost",
				zap.String("dir", w.set.Dir), zap.Int("queued", len(w.queue)))
		}
	})
}

// WriterStats are a writer's figures.
type WriterStats struct {
	Dir string `json:"dir"`
	// Written records, Failed ones (the file could not be written),
	// Dropped ones (the queue was full), Queued ones waiting now.
	Written   uint64 `json:"written"`
	Failed    uint64 `json:"failed"`
	Dropped   uint64 `json:"dropped"`
	Queued    int    `json:"queued"`
	Rotations uint64 `json:"rotations"`
	Files     int64  `json:"files"`
}

// Stats reports the writer's figures.
func (w *Writer) Stats() WriterStats {
	return WriterStats{Dir: w.set.Dir, Written: w.written.Load(), Failed: w.failed.Load(), Dropped: w.dropped.Load(),
		Queued: len(w.queue), Rotations: w.rotations.Load(), Files: w.files.Load()}
}

// run writes the queued records, paced as the access log's lines are
// (internal/rest): requests do not wake it one record at a time.
func (w *Writer) run() {
	defer close(w.done)
	tick := time.NewTicker(flushEvery)
	defer tick.Stop()
	pace := pacer.New()
	defer pace.Stop()
	for {
		select {
		case e := <-pacer.Queue(pace, w.queue):
			w.write(e)
			pace.Drained(1+pacer.Drain(w.queue, w.write), len(w.queue), cap(w.queue))
		case <-pace.Resting():
			pace.Drained(pacer.Drain(w.queue, w.write), len(w.queue), cap(w.queue))
		case <-tick.C:
			w.flush()
			if w.f != nil && w.size > 0 && w.now().Sub(w.opened) >= w.set.MaxFileAge {
				w.rotate()
			}
		case <-w.stop:
			for len(w.queue) > 0 {
				w.write(<-w.queue)
			}
			w.flush()
			w.closeFile()
			return
		}
	}
}

func (w *Writer) write(e *entry) {
	w.line = e.appendLine(w.line[:0])
	e.release()
	if w.f == nil && !w.open() {
		w.failed.Add(1)
		return
	}
	if pending := w.size + int64(len(w.buf)); pending > 0 && pending+int64(len(w.line)) > w.set.MaxFileBytes {
		w.rotate()
		if w.f == nil {
			w.failed.Add(1)
			return
		}
	}
	w.buf = append(w.buf, w.line...)
	w.pending++
	if len(w.buf) >= bufferBytes {
		w.flush()
	}
}

// flush writes the buffered lines; those of a failed write are counted as
// failed, and the file is given up so the next line starts another.
func (w *Writer) flush() {
	if len(w.buf) == 0 || w.f == nil {
		return
	}
	n, err := w.f.Write(w.buf)
	w.size += int64(n)
	if err != nil {
		w.failed.Add(w.pending)
		w.warn("writing a recording file failed; its records are lost", err)
		w.closeFile()
	} else {
		w.written.Add(w.pending)
	}
	w.buf, w.pending = w.buf[:0], 0
}

// open starts a new file, named by the time so that names sort by age,
// and deletes the oldest beyond max_files.
func (w *Writer) open() bool {
	now := w.now()
	if now.Before(w.retryAt) {
		return false
	}
	if err := os.MkdirAll(w.set.Dir, 0o750); err != nil {
		w.retryAt = now.Add(retryOpen)
		w.warn("cannot make the recording directory", err)
		return false
	}
	base := filepath.Join(w.set.Dir, filePrefix+now.UTC().Format("20060102T150405.000000000Z"))
	var err error
	for n := 0; n < 100; n++ {
		name := base + fileSuffix
		if n > 0 {
			name = base + "-" + strconv.Itoa(n) + fileSuffix
		}
		var f io.WriteCloser
		if f, err = w.openFile(name); err == nil {
			w.f, w.name, w.opened, w.size = f, name, now, 0
			w.prune()
			return true
		}
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	w.retryAt = now.Add(retryOpen)
	w.warn("cannot create a recording file", err)
	return false
}

// rotate closes the current file and starts the next.
func (w *Writer) rotate() {
	w.flush()
	w.closeFile()
	if w.open() {
		w.rotations.Add(1)
	}
}

func (w *Writer) closeFile() {
	if w.f == nil {
		return
	}
	if s, ok := w.f.(interface{ Sync() error }); ok {
		_ = s.Sync()
	}
	if err := w.f.Close(); err != nil {
		w.warn("closing a recording file failed", err)
	}
	w.f = nil
}

// prune deletes the oldest recording files beyond max_files (never the
// one being written).
func (w *Writer) prune() {
	ents, err := os.ReadDir(w.set.Dir)
	if err != nil {
		w.warn("cannot list the recording directory", err)
		return
	}
	var names []string
	for _, d := range ents {
		if n := d.Name(); !d.IsDir() && strings.HasPrefix(n, filePrefix) && strings.HasSuffix(n, fileSuffix) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	current := filepath.Base(w.name)
	count := len(names)
	for _, n := range names {
		if count <= w.set.MaxFiles {
			break
		}
		if n == current {
			continue
		}
		if err := os.Remove(filepath.Join(w.set.Dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			w.warn("cannot delete an old recording file", err)
			break
		}
		count--
	}
	w.files.Store(int64(count))
}

// warn logs a writer problem at most once every 10 seconds: a full disk
// must not flood the log.
func (w *Writer) warn(msg string, err error) {
	now := w.now()
	if now.Sub(w.lastWarn) < 10*time.Second {
		return
	}
	w.lastWarn = now
	w.log.Warn(msg, zap.String("dir", w.set.Dir), zap.Error(err))
}
