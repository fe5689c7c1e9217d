// Package otlp exports the gateway's spans to a tracing backend over the
// OpenTelemetry protocol, HTTP/protobuf (POST /v1/traces) or gRPC
// (TraceService/Export). Requests hand their recordings to a bounded
// queue and never wait: when it is full the recording is dropped and
// counted. Background workers batch the queue by size and time, encode
// each batch by hand into a pooled buffer (encode.go) and send it with
// the OTLP exporter's retry rules (retry.go).
package otlp

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/trace"
	"go.uber.org/zap"
)

// Config is what an Exporter needs; zero fields take their defaults.
type Config struct {
	// Send delivers one encoded ExportTraceServiceRequest (NewHTTP,
	// NewGRPC).
	Send Sender
	// Resource is the resource the spans belong to.
	Resource Resource
	// Version is the gateway's version, the instrumentation scope's.
	Version string
	// QueueSize bounds the recordings waiting for export (default 2048).
	QueueSize int
	// BatchSize is the most recordings one export carries (default 512);
	// BatchDelay the longest a recording waits for its batch to fill
	// (default 1s).
	BatchSize  int
	BatchDelay time.Duration
	// Workers send batches in parallel (default 1).
	Workers int
	// Retry is the backoff between tries of a batch.
	Retry  Backoff
	Logger *zap.Logger
}

// Exporter is the queue and its workers. It is safe for concurrent use.
type Exporter struct {
	cfg   Config
	queue chan *chunk
	full  chan struct{} // a batch's worth is queued
	stop  context.Context
	quit  context.CancelFunc
	wg    sync.WaitGroup
	bufs  sync.Pool
	// free holds chunks for requests to encode into: a list of its own,
	// not a sync.Pool, which each collection empties while thousands are
	// in the queue, so that requests would allocate anew after every one.
	free chan *chunk
	once sync.Once

	// Counted in spans, so that /metrics compares with the backend's.
	dropped  atomic.Uint64 // the queue was full
	failed   atomic.Uint64 // a batch failed for good
	exported atomic.Uint64
	retries  atomic.Uint64
	// lastError is the last failure's message, logged once per change.
	lastError atomic.Pointer[string]
}

// maxKeptBuffer is the largest encoding buffer kept for the next batch.
const maxKeptBuffer = 4 << 20

// New starts an exporter's workers; Close stops them.
func New(cfg Config) *Exporter {
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 2048
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 512
	}
	cfg.BatchSize = min(cfg.BatchSize, cfg.QueueSize)
	if cfg.BatchDelay <= 0 {
		cfg.BatchDelay = time.Second
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	cfg.Retry = cfg.Retry.withDefaults()
	e := &Exporter{cfg: cfg, queue: make(chan *chunk, cfg.QueueSize), full: make(chan struct{}, 1)}
	e.stop, e.quit = context.WithCancel(context.Background())
	e.bufs.New = func() any { b := make([]byte, 0, 64<<10); return &b }
	e.free = make(chan *chunk, cfg.QueueSize+cfg.Workers*cfg.BatchSize)
	for range cfg.Workers {
		e.wg.Add(1)
		go e.work()
	}
	return e
}

// chunk is one request's spans, encoded (AppendSpans).
type chunk struct {
	b     []byte
	spans int
}

// maxKeptChunk is the largest chunk buffer kept for another request.
const maxKeptChunk = 16 << 10

// Offer queues r's spans for export, or drops them when the queue is
// full. It never waits; r is released either way. The spans are encoded
// here, on the request's goroutine, while the recording is in this core's
// cache: encoding it on a worker's core cost more than twice as much.
func (e *Exporter) Offer(r *trace.Recording) {
	spans := r.SpanCount()
	if len(e.queue) == cap(e.queue) {
		e.dropped.Add(uint64(spans))
		r.Release()
		return
	}
	var c *chunk
	select {
	case c = <-e.free:
	default:
		c = &chunk{b: make([]byte, 0, 1024)}
	}
	c.b, c.spans = AppendSpans(c.b[:0], r), spans
	r.Release()
	select {
	case e.queue <- c:
		if len(e.queue) >= e.cfg.BatchSize {
			select {
			case e.full <- struct{}{}:
			default:
			}
		}
	default:
		e.dropped.Add(uint64(spans))
		e.putChunk(c)
	}
}

func (e *Exporter) putChunk(c *chunk) {
	if cap(c.b) > maxKeptChunk {
		return
	}
	select {
	case e.free <- c:
	default:
	}
}

// Close stops the workers once they sent what was queued (a batch's
// retries are cut short).
func (e *Exporter) Close() {
	e.once.Do(func() {
		e.quit()
		e.wg.Wait()
		if c, ok := e.cfg.Send.(interface{ Close() }); ok {
			c.Close()
		}
	})
}

// work batches the queue until Close. It is not parked on the queue
// itself: a request handing over its spans would then wake it, a thread
// switch per exported request; it wakes when a batch's worth is queued
// (Offer says so) or batch_delay has passed, and takes what is there.
func (e *Exporter) work() {
	defer e.wg.Done()
	batch := make([]*chunk, 0, e.cfg.BatchSize)
	timer := time.NewTimer(e.cfg.BatchDelay)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			timer.Reset(e.cfg.BatchDelay)
		case <-e.full:
		case <-e.stop.Done():
			e.drain(batch)
			return
		}
		batch = e.drain(batch)
	}
}

// drain sends what is queued, a batch at a time.
func (e *Exporter) drain(batch []*chunk) []*chunk {
	for {
		select {
		case r := <-e.queue:
			batch = append(batch, r)
			if len(batch) == cap(batch) {
				batch = e.flush(batch)
			}
		default:
			return e.flush(batch)
		}
	}
}

// flush sends batch as one export and gives its chunks back.
func (e *Exporter) flush(batch []*chunk) []*chunk {
	if len(batch) == 0 {
		return batch
	}
	bp := e.bufs.Get().(*[]byte)
	parts := make([][]byte, len(batch))
	spans := 0
	for i, c := range batch {
		parts[i] = c.b
		spans += c.spans
	}
	body := AppendRequest((*bp)[:0], e.cfg.Resource, e.cfg.Version, parts)
	for i, c := range batch {
		e.putChunk(c)
		batch[i] = nil
	}
	if err := e.deliver(body); err != nil {
		e.failed.Add(uint64(spans))
		e.noteError(err)
	} else {
		e.exported.Add(uint64(spans))
		e.lastError.Store(nil)
	}
	if cap(body) <= maxKeptBuffer {
		*bp = body[:0]
		e.bufs.Put(bp)
	}
	return batch[:0]
}

// noteError logs an export failure when it differs from the last one:
// a backend that stays down is logged once, not once a batch.
func (e *Exporter) noteError(err error) {
	msg := err.Error()
	if last := e.lastError.Swap(&msg); last != nil && *last == msg {
		return
	}
	e.cfg.Logger.Warn("trace export failed; spans dropped", zap.Error(err))
}

// Stats are the exporter's counts, in spans, since it started.
type Stats struct {
	Exported, Dropped, Failed, Retries uint64
	Queued                             int
}

// Stats returns the exporter's counts.
func (e *Exporter) Stats() Stats {
	return Stats{Exported: e.exported.Load(), Dropped: e.dropped.Load(), Failed: e.failed.Load(),
		Retries: e.retries.Load(), Queued: len(e.queue)}
}
