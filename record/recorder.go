package record

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/auth"
	"github.com/tollgate/tollgate/internal/bytesconv"
	"github.com/tollgate/tollgate/pipeline"
)

// Recorder is a route's record rule as a filter. Its Handle picks the
// sampled requests and copies each one, masked, into a pooled record; its
// HandleResponse completes the record with the answer and hands it to the
// Writer's queue, or drops and counts it when the queue is full. Requests
// it does not sample cost a switch load and a random draw, and allocate
// nothing. Safe for concurrent use.
//
// It sits at pipeline.StageRecord: what it records is the request as the
// client sent it (rewrites and forwarding come after), with the identity
// the auth step found, and requests the gateway refused before it (bad
// signatures, limits, WAF, an open breaker) are not recorded.
type Recorder struct {
	route     string
	w         *Writer
	masks     masks
	maxBody   int
	sample    float64
	all       bool
	threshold uint64
	sw        *recordSwitch
	counts    *recordCounts
	consumers *auth.Consumers
}

// recordSwitch is a route's run-time switch; it survives reloads. The
// file's `on` wins when it changes, the operator's word otherwise.
type recordSwitch struct {
	on                       atomic.Bool
	configured, configuredOn bool
}

type recordCounts struct {
	queued, dropped atomic.Uint64
}

// Handle implements pipeline.Filter.
func (r *Recorder) Handle(c *pipeline.Ctx) pipeline.Verdict {
	if !r.sw.on.Load() || !r.all && rand.Uint64() >= r.threshold {
		return pipeline.Continue
	}
	e := entryPool.Get().(*entry)
	e.takeRequest(c, &r.masks, r.maxBody, r.secretOf(c))
	recording.Set(c, e)
	return pipeline.Continue
}

// recording is what Handle took of a request being recorded, for
// HandleResponse to complete with the answer (a pooled entry); nil when
// the request is not being recorded.
var recording = pipeline.NewSlot[*entry]()

// HandleResponse implements pipeline.ResponseFilter.
func (r *Recorder) HandleResponse(c *pipeline.Ctx) {
	e := recording.Get(c)
	if e == nil {
		return
	}
	recording.Clear(c)
	e.takeResponse(c, &r.masks, r.maxBody, time.Now())
	if r.w.enqueue(e) {
		r.counts.queued.Add(1)
		return
	}
	r.counts.dropped.Add(1)
	e.release()
}

// secretOf returns the calling consumer's app secret, so that it is
// blotted out of the record wherever a client put it.
func (r *Recorder) secretOf(c *pipeline.Ctx) []byte {
	if r.consumers == nil || c.Consumer == "" {
		return nil
	}
	if cs := r.consumers.Lookup(bytesconv.S2B(c.Consumer)); cs != nil {
		return cs.Secret
	}
	return nil
}

// Route names the route the rule records.
func (r *Recorder) Route() string { return r.route }

// Switch turns recording on or off at run time; it reports the previous
// setting.
func (r *Recorder) Switch(on bool) bool { return r.sw.on.Swap(on) }

// On reports whether the rule records.
func (r *Recorder) On() bool { return r.sw.on.Load() }

// Sample reports the share of requests recorded.
func (r *Recorder) Sample() float64 { return r.sample }

// Counts reports the records handed to the writer and those dropped
// because its queue was full.
func (r *Recorder) Counts() (queued, dropped uint64) {
	return r.counts.queued.Load(), r.counts.dropped.Load()
}

// Writer returns the writer the rule hands its records to.
func (r *Recorder) Writer() *Writer { return r.w }

// newRecorder compiles a route's rule.
func newRecorder(b *pipeline.Build, rule *Rule) (*Recorder, error) {
	w, _ := WriterKey.Get(b.Env)
	if w == nil {
		return nil, errors.New("record needs the top-level recording section (recording: {dir: ...})")
	}
	sample, err := CheckSample("record", rule.Sample)
	if err != nil {
		return nil, err
	}
	maxBody := rule.MaxBody
	switch {
	case maxBody == 0:
		maxBody = defaultMaxBody
	case maxBody < 0 || maxBody > maxMaxBody:
		return nil, fmt.Errorf("record.max_body %d: want 1..%d", maxBody, maxMaxBody)
	}
	m, err := compileMasks(rule.Mask)
	if err != nil {
		return nil, fmt.Errorf("record.%v", err)
	}
	r := &Recorder{route: b.Route.Name, w: w, masks: m, maxBody: maxBody, sample: sample,
		all: sample >= 1, threshold: SampleThreshold(sample)}
	on := rule.On == nil || *rule.On
	r.sw = b.State.Get("record.switch|"+b.Route.Name, func() (any, func()) { return &recordSwitch{}, nil }).(*recordSwitch)
	if !r.sw.configured || r.sw.configuredOn != on {
		r.sw.on.Store(on)
		r.sw.configured, r.sw.configuredOn = true, on
	}
	r.counts = b.State.Get("record.counts|"+b.Route.Name, func() (any, func()) { return new(recordCounts), nil }).(*recordCounts)
	if id, ok := auth.IdentityKey.Get(b.Env); ok && id != nil {
		r.consumers = id.Consumers
	}
	return r, nil
}

// SampleThreshold maps a share to the draws of rand.Uint64 below it: a
// request is sampled when its draw is below.
func SampleThreshold(share float64) uint64 {
	if share >= 1 {
		return ^uint64(0)
	}
	return uint64(share * (1 << 64))
}
