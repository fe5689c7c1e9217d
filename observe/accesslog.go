// Package observe records what the gateway did: the asynchronous access
// log, metrics and counters. Nothing here does I/O on the request path.
// (The trace context the log carries is package trace's.)
package observe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/internal/pacer"
	"github.com/tollgate/tollgate/pipeline"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// AccessLog writes one JSON line per request, off the request path: Record
// copies what the line needs into a pooled entry and queues it; one
// goroutine encodes and writes. When the writer falls behind and the queue
// is full, lines are dropped and counted, never waited for.
//
// The writer goroutine owns the output: it buffers whole lines, flushes
// them, rotates the file by size and reopens it for logrotate, so a line
// is never split between two files and rotation never touches the
// request path.
type AccessLog struct {
	node     string
	queue    chan *entry
	dropped  atomic.Uint64
	written  atomic.Uint64
	wakes    atomic.Uint64 // times a queued line woke the writer (run)
	logger   *zap.Logger
	out      *logSink
	reopenCh chan chan error
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
	closeErr error
}

// AccessLogOptions configures OpenAccessLog. Zero values mean the default
// stated beside each field.
type AccessLogOptions struct {
	// Path is "stdout", "stderr", "off" (or empty: no log) or a file path.
	Path string
	// Buffer is how many lines may wait for the writer before new ones are
	// dropped; default 65536.
	Buffer int
	// Node names this gateway in every line.
	Node string
	// MaxFileBytes rotates a file log before a line would take it past this
	// size: the file becomes Path.1 (Path.1 becomes Path.2, and so on) and
	// a fresh file starts. A line longer than MaxFileBytes gets a file of
	// its own. 0: never rotate by size (logrotate and Reopen instead).
	// Ignored for stdout and stderr.
	MaxFileBytes int64
	// MaxBackups is how many rotated files are kept; the oldest beyond it
	// is deleted. Default 5.
	MaxBackups int
}

type entry struct {
	at        time.Time
	traceID   [32]byte
	spanID    [16]byte
	requestID [64]byte
	reqIDLen  uint8
	method    [16]byte
	methodLen uint8
	path      []byte
	route     string
	status    int
	upstream  string
	upstreamT time.Duration
	total     time.Duration
	bytesIn   int
	bytesOut  int
	client    [46]byte
	clientLen uint8
	decision  string
	consumer  string // strings from config or a verified-token cache: immutable
	userID    string
	service   string
	version   uint64
	attempts  int
	result    pipeline.Result
}

var entryPool = sync.Pool{New: func() any { return &entry{path: make([]byte, 0, 128)} }}

// maxLoggedPath bounds what one line may carry of a request path.
const maxLoggedPath = 1024

// OpenAccessLog opens the log o describes. It returns nil for "off".
func OpenAccessLog(o AccessLogOptions) (*AccessLog, error) {
	out := &logSink{maxBytes: o.MaxFileBytes, backups: o.MaxBackups}
	switch o.Path {
	case "off", "":
		return nil, nil
	case "stdout":
		out.w = os.Stdout
	case "stderr":
		out.w = os.Stderr
	default:
		out.path = o.Path
		if err := out.open(); err != nil {
			return nil, fmt.Errorf("opening access log: %w", err)
		}
	}
	if out.backups <= 0 {
		out.backups = 5
	}
	encCfg := zapcore.EncoderConfig{
		TimeKey:        "time",
		MessageKey:     zapcore.OmitKey,
		LevelKey:       zapcore.OmitKey,
		LineEnding:     zapcore.DefaultLineEnding,
		EncodeTime:     zapcore.RFC3339NanoTimeEncoder,
		EncodeDuration: zapcore.MillisDurationEncoder,
	}
	size := o.Buffer
	if size <= 0 {
		size = 65536
	}
	l := &AccessLog{
		node:     o.Node,
		queue:    make(chan *entry, size),
		out:      out,
		reopenCh: make(chan chan error),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	out.lost = &l.dropped
	l.logger = zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(encCfg), out, zapcore.InfoLevel))
	go l.run()
	return l, nil
}

// Record queues c's line. It copies everything it needs, so c may be
// released right after.
func (l *AccessLog) Record(c *pipeline.Ctx, now time.Time) {
	e := entryPool.Get().(*entry)
	e.at = now
	e.traceID = c.Trace.TraceHex
	e.spanID = c.Trace.SpanHex
	e.reqIDLen = uint8(copy(e.requestID[:], c.Trace.RequestID))
	e.methodLen = uint8(copy(e.method[:], c.Req.Header.Method()))
	p := c.Target.Path
	if len(p) == 0 {
		// Refused before a canonical path existed: the target as sent is
		// what the log must show (JSON-escaped by the encoder).
		p = c.Req.Header.RequestURI()
	}
	if len(p) > maxLoggedPath {
		p = p[:maxLoggedPath]
	}
	e.path = append(e.path[:0], p...)
	e.route = c.RouteName
	e.status = c.Resp.StatusCode()
	e.upstream = c.Outcome.Instance
	e.upstreamT = c.Outcome.Latency
	e.total = now.Sub(c.Start)
	e.bytesIn = c.BytesIn
	e.bytesOut = codec.BodyLen(c.Resp)
	e.clientLen = uint8(len(c.ClientIP.AppendTo(e.client[:0])))
	e.decision = c.Decision
	e.consumer = c.Consumer
	e.userID = c.UserID
	e.service = c.Outcome.Service
	e.version = c.ConfigVersion
	e.attempts = c.Outcome.Attempts
	e.result = c.Outcome.Result
	select {
	case l.queue <- e:
	default:
		l.dropped.Add(1)
		entryPool.Put(e)
	}
}

// Dropped reports lines lost: the writer fell behind and the queue was
// full, or the file could not be written.
func (l *AccessLog) Dropped() uint64 { return l.dropped.Load() }

// Written reports lines handed to the writer.
func (l *AccessLog) Written() uint64 { return l.written.Load() }

// Rotations reports the rotations by size done, and those that failed (the
// directory not writable, say: the lines go on into the current file).
func (l *AccessLog) Rotations() (done, failed uint64) {
	return l.out.rotated.Load(), l.out.failed.Load()
}

// flushEvery bounds how long a written line may sit in the writer's buffer.
const flushEvery = 200 * time.Millisecond

// run writes the queued lines, paced (internal/rest): idle, it waits on
// the queue; once a line comes, it drains the queue and rests between
// drains, so that requests do not wake it one line at a time.
func (l *AccessLog) run() {
	defer close(l.done)
	tick := time.NewTicker(flushEvery)
	defer tick.Stop()
	pace := pacer.New()
	defer pace.Stop()
	for {
		select {
		case e := <-pacer.Queue(pace, l.queue):
			l.wakes.Add(1)
			l.write(e)
			pace.Drained(1+pacer.Drain(l.queue, l.write), len(l.queue), cap(l.queue))
		case <-pace.Resting():
			pace.Drained(pacer.Drain(l.queue, l.write), len(l.queue), cap(l.queue))
		case <-tick.C:
			l.out.flush()
		case reply := <-l.reopenCh:
			reply <- l.out.reopen()
		case <-l.stop:
			for pacer.Drain(l.queue, l.write) > 0 {
			}
			l.closeErr = l.out.close()
			return
		}
	}
}

func (l *AccessLog) write(e *entry) {
	var masked [maxMaskedUser]byte
	fields := [...]zap.Field{
		zap.ByteString("traceId", e.traceID[:]),
		zap.ByteString("spanId", e.spanID[:]),
		zap.ByteString("requestId", e.requestID[:e.reqIDLen]),
		zap.ByteString("client", e.client[:e.clientLen]),
		zap.ByteString("method", e.method[:e.methodLen]),
		zap.ByteString("path", e.path),
		zap.String("route", e.route),
		zap.String("consumer", e.consumer),
		zap.ByteString("userId", MaskUserID(masked[:0], e.userID)),
		zap.Int("status", e.status),
		zap.String("service", e.service),
		zap.String("upstream", e.upstream),
		zap.Duration("upstreamMs", e.upstreamT),
		zap.Duration("totalMs", e.total),
		zap.Int("attempts", e.attempts),
		zap.String("upstreamResult", e.result.String()),
		zap.Int("bytesIn", e.bytesIn),
		zap.Int("bytesOut", e.bytesOut),
		zap.String("node", l.node),
		zap.String("decision", e.decision),
		zap.Uint64("configVersion", e.version),
	}
	if ce := l.logger.Check(zapcore.InfoLevel, ""); ce != nil {
		ce.Time = e.at
		ce.Write(fields[:]...)
	}
	l.written.Add(1)
	e.consumer, e.userID, e.service, e.route, e.upstream, e.decision = "", "", "", "", "", ""
	entryPool.Put(e)
}

// Close writes every line queued so far, flushes and closes the file.
// Lines recorded after Close (a request outliving the drain) are never
// written, but recording them is harmless.
func (l *AccessLog) Close() error {
	l.once.Do(func() {
		close(l.stop)
		<-l.done
	})
	return l.closeErr
}

// maxMaskedUser bounds a masked user id in the log.
const maxMaskedUser = 64

// MaskUserID appends id masked for the access log: its first two and last
// two characters around "***" ("u-12345" → "u-***45"), only "***" for ids
// of six bytes or less, nothing for an empty id. The log can tell users
// apart and follow one through a trace without holding their ids.
func MaskUserID(dst []byte, id string) []byte {
	switch {
	case id == "":
		return dst
	case len(id) <= 6:
		return append(dst, "***"...)
	}
	dst = append(dst, id[:2]...)
	dst = append(dst, "***"...)
	return append(dst, id[len(id)-2:]...)
}

// Reopen reopens the log file at its path (after logrotate moved it away):
// lines written before go to the old file, later ones to the new. It does
// nothing when the log writes to stdout or stderr, or after Close. Safe to
// call while requests are logged: the writer goroutine does the work.
func (l *AccessLog) Reopen() error {
	if l == nil || l.out.path == "" {
		return nil
	}
	reply := make(chan error, 1)
	select {
	case l.reopenCh <- reply:
		return <-reply
	case <-l.done:
		return nil
	}
}

func openLogFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// sinkBuffer is how many bytes of whole lines the writer gathers before
// it writes them out.
const sinkBuffer = 256 << 10

// logSink is where the encoder puts lines: zap hands it one whole line per
// Write. Only the writer goroutine uses it, so it needs no lock.
type logSink struct {
	w    io.Writer // stdout, stderr, or f
	f    *os.File  // nil unless writing to a file
	path string
	buf  []byte // whole lines not yet written
	size int64  // bytes in the file
	// maxBytes and backups: rotation by size (maxBytes 0: off). After a
	// rotation fails (a directory without write permission, say), the
	// next try waits for another maxBytes of lines (retryAt) rather than
	// costing renames on every line.
	maxBytes, retryAt int64
	backups           int
	lost              *atomic.Uint64 // lines a failed write lost
	err               error          // the last failed write, for Close
	// rotated and failed count rotations; read by Rotations.
	rotated, failed atomic.Uint64
}

func (s *logSink) Write(p []byte) (int, error) {
	if s.maxBytes > 0 && s.f != nil {
		pending := s.size + int64(len(s.buf))
		if pending > 0 && pending+int64(len(p)) > max(s.maxBytes, s.retryAt) {
			s.flush()
			s.rotate()
		}
	}
	s.buf = append(s.buf, p...)
	if len(s.buf) >= sinkBuffer {
		s.flush()
	}
	return len(p), nil
}

// Sync writes what is buffered (zap calls it only for errors and above).
func (s *logSink) Sync() error {
	s.flush()
	return nil
}

// flush writes the buffered lines; the lines of a failed write are
// counted as lost.
func (s *logSink) flush() {
	if len(s.buf) == 0 {
		return
	}
	n, err := s.w.Write(s.buf)
	s.size += int64(n)
	if err != nil {
		s.err = err
		if s.lost != nil {
			s.lost.Add(uint64(bytes.Count(s.buf[n:], []byte{'\n'})))
		}
	}
	s.buf = s.buf[:0]
}

// open opens the file at path for appending, counting what it holds.
func (s *logSink) open() error {
	f, err := openLogFile(s.path)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	s.f, s.w, s.size = f, f, st.Size()
	return nil
}

// reopen flushes into the current file and opens path afresh.
func (s *logSink) reopen() error {
	s.flush()
	old := s.f
	if err := s.open(); err != nil {
		return fmt.Errorf("reopening access log: %w", err)
	}
	s.retryAt = 0
	return old.Close()
}

// backup names the n-th rotated file.
func (s *logSink) backup(n int) string { return s.path + "." + strconv.Itoa(n) }

// rotate moves the (flushed) file to path.1, shifting older backups up
// (path.<backups> is overwritten: the oldest is deleted), and starts a
// fresh file. The file is renamed while still open and closed only once
// the new one is open: if anything fails, lines go on into the file the
// writer holds, and nothing is lost.
func (s *logSink) rotate() {
	fail := func() {
		s.failed.Add(1)
		s.retryAt = s.size + s.maxBytes
	}
	// Each rename replaces its target: the oldest backup goes first.
	for n := s.backups - 1; n >= 1; n-- {
		if err := os.Rename(s.backup(n), s.backup(n+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			fail()
			return
		}
	}
	// The file may be gone already (moved away by hand without a
	// SIGUSR1): then only the fresh file is needed.
	if err := os.Rename(s.path, s.backup(1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		fail()
		return
	}
	old := s.f
	if err := s.open(); err != nil {
		fail()
		return
	}
	_ = old.Close()
	s.retryAt = 0
	s.rotated.Add(1)
}

// close flushes, syncs and closes a file log.
func (s *logSink) close() error {
	s.flush()
	if s.f == nil {
		return s.err
	}
	err := s.f.Sync()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.err
	}
	return err
}
