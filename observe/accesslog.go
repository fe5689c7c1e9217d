package observe

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/pipeline"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// AccessLog writes one JSON line per request, off the request path: Record
// copies what the line needs into a pooled entry and queues it; one
// goroutine encodes and writes. When the writer falls behind and the queue
// is full, lines are dropped and counted, never waited for.
type AccessLog struct {
	node    string
	queue   chan *entry
	dropped atomic.Uint64
	written atomic.Uint64
	logger  *zap.Logger
	sync    func() error
	closeFn func() error
	file    *reopenFile // nil unless writing to a file
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
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

// OpenAccessLog opens the log at path ("stdout", "stderr", "off" or a file)
// with a queue of size lines. It returns nil for "off".
func OpenAccessLog(path string, size int, node string) (*AccessLog, error) {
	var ws zapcore.WriteSyncer
	var closeFn func() error
	var file *reopenFile
	switch path {
	case "off", "":
		return nil, nil
	case "stdout":
		ws = zapcore.Lock(os.Stdout)
	case "stderr":
		ws = zapcore.Lock(os.Stderr)
	default:
		f, err := openLogFile(path)
		if err != nil {
			return nil, fmt.Errorf("opening access log: %w", err)
		}
		file = &reopenFile{path: path, f: f}
		ws, closeFn = file, file.Close
	}
	buffered := &zapcore.BufferedWriteSyncer{WS: ws, Size: 256 << 10, FlushInterval: 200 * time.Millisecond}
	encCfg := zapcore.EncoderConfig{
		TimeKey:        "time",
		MessageKey:     zapcore.OmitKey,
		LevelKey:       zapcore.OmitKey,
		LineEnding:     zapcore.DefaultLineEnding,
		EncodeTime:     zapcore.RFC3339NanoTimeEncoder,
		EncodeDuration: zapcore.MillisDurationEncoder,
	}
	core := zapcore.NewCore(zapcore.NewJSONEncoder(encCfg), buffered, zapcore.InfoLevel)
	if size <= 0 {
		size = 65536
	}
	l := &AccessLog{
		node:    node,
		queue:   make(chan *entry, size),
		logger:  zap.New(core),
		sync:    buffered.Stop,
		closeFn: closeFn,
		file:    file,
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
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
	e.bytesOut = len(c.Resp.Body())
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

// Dropped reports lines lost because the writer fell behind.
func (l *AccessLog) Dropped() uint64 { return l.dropped.Load() }

// Written reports lines handed to the writer.
func (l *AccessLog) Written() uint64 { return l.written.Load() }

func (l *AccessLog) run() {
	defer close(l.done)
	for {
		select {
		case e := <-l.queue:
			l.write(e)
		case <-l.stop:
			for {
				select {
				case e := <-l.queue:
					l.write(e)
				default:
					return
				}
			}
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

// Close writes every line queued so far and flushes. Lines recorded after
// Close (a request outliving the drain) are never written, but recording
// them is harmless.
func (l *AccessLog) Close() error {
	var err error
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		err = l.sync()
		if l.closeFn != nil {
			if cerr := l.closeFn(); err == nil {
				err = cerr
			}
		}
	})
	return err
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

// Reopen reopens the log file at its path (after logrotate moved it away);
// lines already queued go to the new file. It does nothing when the log
// writes to stdout or stderr. Safe to call while requests are logged: only
// the writer goroutine and Reopen touch the file.
func (l *AccessLog) Reopen() error {
	if l == nil || l.file == nil {
		return nil
	}
	return l.file.reopen()
}

func openLogFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// reopenFile is the access log's file, which Reopen can swap.
type reopenFile struct {
	mu   sync.Mutex
	path string
	f    *os.File
}

func (r *reopenFile) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.f.Write(p)
}

func (r *reopenFile) Sync() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.f.Sync()
}

func (r *reopenFile) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.f.Close()
}

func (r *reopenFile) reopen() error {
	f, err := openLogFile(r.path)
	if err != nil {
		return fmt.Errorf("reopening access log: %w", err)
	}
	r.mu.Lock()
	old := r.f
	r.f = f
	r.mu.Unlock()
	return old.Close()
}
