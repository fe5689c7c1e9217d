package trace

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"
)

// A Recording holds one request's spans while it runs: the gateway's
// server span, whose attributes are filled when the request ends, and a
// child span per step that can take time (each upstream attempt, a nonce
// claim, a gRPC call, a wait). It is taken from a pool when the request
// begins (Context.Rec) and goes back to it once exported or dropped, so
// recording costs no allocation.
//
// Every string a Recording keeps points into the configuration snapshot
// or is a constant: a snapshot stays reachable for as long as something
// refers to it, so the exporter may read them after the request ended.
type Recording struct {
	recorded

	// spans are the child spans, in the order they began; a request with
	// more than maxChildren steps keeps the first ones (DroppedSpans counts
	// the rest), as it keeps the first maxEvents events. Only the used
	// ones are cleared for the next request.
	spans  [maxChildren]Span
	events [maxEvents]Event
}

// recorded is what a Recording holds of one request but its spans' and
// events' slots: cleared whole for the next request.
type recorded struct {
	TraceID  [16]byte
	SpanID   [8]byte
	ParentID [8]byte
	// Sampled is the head decision (the caller's flag, or the ratio); the
	// tail rule may still export an unsampled recording.
	Sampled bool

	Start, End int64 // unix nanoseconds

	// The server span's attributes.
	Route        string
	PathTemplate string
	Consumer     string
	Decision     string
	Service      string
	Result       string
	Status       int
	Attempts     int
	Client       netip.Addr
	Node         string
	RequestID    []byte
	method       [16]byte
	methodLen    uint8
	requestIDBuf [maxRequestID]byte

	nspans       uint8
	nevents      uint8
	DroppedSpans uint16
	DroppedEvent uint16
}

// Span is a child span of the gateway's server span.
type Span struct {
	ID    [8]byte
	Kind  SpanKind
	Start int64
	End   int64
	// Instance is the upstream instance an attempt went to; Service its
	// service.
	Instance string
	Service  string
	// Status is the attempt's answer status (0: none), Result how it
	// ended (pipeline.Result's name) and Error that it failed.
	Status int
	Result string
	Error  bool
}

// Event is something that happened at a point of the server span: a
// refusal, with the answer's status and message.
type Event struct {
	Time    int64
	Name    string
	Status  int
	Message string
}

// SpanKind names a child span: what step of the request it times.
type SpanKind uint8

const (
	SpanUpstream     SpanKind = iota // one HTTP attempt upstream (a retry is another)
	SpanGRPCCall                     // one unary gRPC call upstream
	SpanNonceClaim                   // the cluster's nonce claim (a Redis round trip)
	SpanKeyFetch                     // fetching a verification key
	SpanAdaptiveWait                 // a wait for an adaptive concurrency slot
)

var spanNames = [...]string{"upstream", "grpc call", "nonce claim", "key fetch", "adaptive wait"}

// Name is the span's name as exported.
func (k SpanKind) Name() string { return spanNames[k] }

// Client reports whether the span is a call to another service (an OTLP
// client span) rather than work of the gateway's own.
func (k SpanKind) Client() bool { return k == SpanUpstream || k == SpanGRPCCall || k == SpanNonceClaim }

const (
	maxChildren = 8
	maxEvents   = 8
)

var recordings = sync.Pool{New: func() any { return new(Recording) }}

// NewRecording returns an empty recording from the pool.
func NewRecording() *Recording { return recordings.Get().(*Recording) }

// Release returns r to the pool; r must not be used afterwards.
func (r *Recording) Release() {
	clear(r.spans[:r.nspans])
	clear(r.events[:r.nevents])
	r.recorded = recorded{}
	recordings.Put(r)
}

// SetMethod keeps the request's method (up to 16 bytes).
func (r *Recording) SetMethod(m []byte) { r.methodLen = uint8(copy(r.method[:], m)) }

// Method returns the method kept by SetMethod.
func (r *Recording) Method() []byte { return r.method[:r.methodLen] }

// SetRequestID keeps a copy of the request id.
func (r *Recording) SetRequestID(id []byte) {
	n := copy(r.requestIDBuf[:], id)
	r.RequestID = r.requestIDBuf[:n]
}

// Spans returns the child spans recorded.
func (r *Recording) Spans() []Span { return r.spans[:r.nspans] }

// Events returns the events recorded.
func (r *Recording) Events() []Event { return r.events[:r.nevents] }

// SpanCount is how many spans the recording exports: its server span and
// its children.
func (r *Recording) SpanCount() int { return 1 + int(r.nspans) }

// NoSpan is what StartSpan returns when nothing is recorded: EndSpan
// ignores it.
const NoSpan = -1

// StartSpan begins a child span of kind at now and returns its handle for
// EndSpan; NoSpan when the request is not recorded or has no room left.
func (t *Context) StartSpan(kind SpanKind, now time.Time) int {
	r := t.Rec
	if r == nil {
		return NoSpan
	}
	if int(r.nspans) == maxChildren {
		r.DroppedSpans++
		return NoSpan
	}
	i := int(r.nspans)
	r.nspans++
	s := &r.spans[i]
	*s = Span{Kind: kind, Start: now.UnixNano()}
	binary.LittleEndian.PutUint64(s.ID[:], rand.Uint64()|1)
	return i
}

// Span returns the child span h names (StartSpan), nil for NoSpan, for
// the step to fill its attributes in before EndSpan.
func (t *Context) Span(h int) *Span {
	if h < 0 || t.Rec == nil || h >= int(t.Rec.nspans) {
		return nil
	}
	return &t.Rec.spans[h]
}

// EndSpan ends the child span h at now.
func (t *Context) EndSpan(h int, now time.Time) {
	if s := t.Span(h); s != nil {
		s.End = now.UnixNano()
	}
}

// AddEvent records an event on the server span (a refusal: the answer's
// status and message) when the request is recorded.
func (t *Context) AddEvent(name string, now time.Time, status int, message string) {
	r := t.Rec
	if r == nil {
		return
	}
	if int(r.nevents) == maxEvents {
		r.DroppedEvent++
		return
	}
	r.events[r.nevents] = Event{Time: now.UnixNano(), Name: name, Status: status, Message: message}
	r.nevents++
}
