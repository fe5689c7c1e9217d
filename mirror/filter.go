package mirror

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/record"
	"github.com/tollgate/tollgate/upstream"
	"github.com/valyala/fasthttp"
)

// Filter is a route's mirror rule: once the primary answered,
// a copy of a sampled request, as it was forwarded, is queued for a second
// service and sent by background workers through that service's pooled
// connections, balancer and health. The client's answer never waits for
// the mirror: a full queue drops the copy and counts it, and a slow or
// dead mirror service only fills its own queue. With compare on, the
// workers also compare the mirror's answer with the primary's and count
// the differences. Safe for concurrent use.
type Filter struct {
	route     string
	svc       *upstream.Service
	all       bool
	threshold uint64
	maxBody   int
	compare   bool
	ignore    []record.Ignore
	pool      *pool
	counts    *counts
}

type counts struct {
	ok, failed, dropped, skipped atomic.Uint64
	compared, diffStatus         atomic.Uint64
	diffBody                     atomic.Uint64
}

// Header marks the copies a mirror sends, so that the mirror
// service can tell shadow traffic from real and skip side effects (a
// payment made twice).
const Header = "X-Tollgate-Mirror"

var hdrMirror, hdrMirrorValue = []byte(Header), []byte("1")

// Handle implements pipeline.Filter; the copy is made once the primary
// answered (HandleResponse), from the request as it was forwarded.
func (m *Filter) Handle(*pipeline.Ctx) pipeline.Verdict { return pipeline.Continue }

// HandleResponse implements pipeline.ResponseFilter.
func (m *Filter) HandleResponse(c *pipeline.Ctx) {
	if c.Outcome.Result == pipeline.ResultNone || !m.all && rand.Uint64() >= m.threshold {
		return // the request never went upstream, or is not sampled
	}
	if c.Req.IsBodyStream() || len(c.Req.Body()) > m.maxBody {
		m.counts.skipped.Add(1)
		return
	}
	j := jobPool.Get().(*job)
	// The copy is of the request as forwarded (c.Fields), marked; j.req,
	// the client's method and body with the upstream target and fields
	// (codec.Apply), is what the mirror service routes and balances on.
	c.Fields.CopyTo(&j.fields)
	j.fields.Add(hdrMirror, hdrMirrorValue)
	c.Req.CopyTo(&j.req)
	codec.Apply(&j.req, &j.fields)
	j.m = m
	j.comparable = m.compare && !c.Resp.IsBodyStream() && len(c.Resp.Body()) <= m.maxBody
	if j.comparable {
		c.Resp.CopyTo(&j.primary)
	}
	if !m.pool.enqueue(j) {
		m.counts.dropped.Add(1)
		j.release()
	}
}

// Counts are a mirror rule's figures.
type Counts struct {
	// Sent copies the mirror answered (OK) or failed to (Failed: refused,
	// timed out, …); Dropped ones found the queue full; Skipped ones had a
	// body too large (or streaming) to copy.
	OK      uint64 `json:"ok"`
	Failed  uint64 `json:"failed"`
	Dropped uint64 `json:"dropped"`
	Skipped uint64 `json:"skipped"`
	// Compared answers, and those whose status or body differed.
	Compared      uint64 `json:"compared"`
	StatusDiffers uint64 `json:"status_differs"`
	BodyDiffers   uint64 `json:"body_differs"`
}

// Counts reports the rule's figures.
func (m *Filter) Counts() Counts {
	c := m.counts
	return Counts{OK: c.ok.Load(), Failed: c.failed.Load(), Dropped: c.dropped.Load(), Skipped: c.skipped.Load(),
		Compared: c.compared.Load(), StatusDiffers: c.diffStatus.Load(), BodyDiffers: c.diffBody.Load()}
}

// job is one copy on its way to the mirror service.
type job struct {
	fields        codec.FieldList
	req           fasthttp.Request
	resp, primary fasthttp.Response
	m             *Filter
	comparable    bool
}

var jobPool = sync.Pool{New: func() any { return new(job) }}

func (j *job) release() {
	j.fields.Reset()
	j.req.Reset()
	j.resp.Reset()
	j.primary.Reset()
	j.m = nil
	jobPool.Put(j)
}

// pool is a route's queue and workers; it survives reloads that
// keep the rule's queue settings.
type pool struct {
	queue chan *job
	stop  chan struct{}
	once  sync.Once
}

func newPool(queue, workers int) *pool {
	p := &pool{queue: make(chan *job, queue), stop: make(chan struct{})}
	for range workers {
		go p.work()
	}
	return p
}

func (p *pool) enqueue(j *job) bool {
	select {
	case p.queue <- j:
		return true
	default:
		return false
	}
}

// close stops the workers once the copies they are sending are done;
// copies still queued are dropped.
func (p *pool) close() { p.once.Do(func() { close(p.stop) }) }

func (p *pool) work() {
	for {
		select {
		case <-p.stop:
			return
		case j := <-p.queue:
			j.m.send(j)
			j.release()
		}
	}
}

// send forwards the copy through the mirror service and compares answers.
func (m *Filter) send(j *job) {
	c := pipeline.AcquireParsed(&j.req, &j.resp)
	defer pipeline.Release(c)
	c.Start = time.Now()
	j.fields.CopyTo(&c.Fields)
	m.svc.Serve(c)
	if c.Outcome.Result != pipeline.ResultOK {
		m.counts.failed.Add(1)
		return
	}
	m.counts.ok.Add(1)
	if !j.comparable {
		return
	}
	m.counts.compared.Add(1)
	if j.primary.StatusCode() != j.resp.StatusCode() {
		m.counts.diffStatus.Add(1)
	}
	want, werr := j.primary.BodyUncompressedWithLimit(m.maxBody)
	got, gerr := j.resp.BodyUncompressedWithLimit(m.maxBody)
	if werr != nil || gerr != nil || len(record.CompareBodies(want, got, m.ignore, 1)) > 0 {
		m.counts.diffBody.Add(1)
	}
}

// New compiles a route's mirror rule.
func New(b *pipeline.Build, rule *Rule) (*Filter, error) {
	if !b.Route.Forwards {
		return nil, errors.New("mirror applies only to routes that forward")
	}
	if rule.Service == "" {
		return nil, errors.New("mirror.service is required")
	}
	services, _ := upstream.ServicesKey.Get(b.Env)
	svc := services[rule.Service]
	if svc == nil {
		return nil, fmt.Errorf("mirror.service %q is not defined", rule.Service)
	}
	sample, err := record.CheckSample("mirror", rule.Sample)
	if err != nil {
		return nil, err
	}
	ignore, err := record.ParseIgnores(rule.Ignore)
	if err != nil {
		return nil, fmt.Errorf("mirror.%v", err)
	}
	maxBody, queue, conc := rule.MaxBody, rule.Queue, rule.Concurrency
	if maxBody == 0 {
		maxBody = defaultMaxBody
	}
	if queue == 0 {
		queue = defaultQueue
	}
	if conc == 0 {
		conc = defaultConcurrency
	}
	switch {
	case maxBody < 0 || maxBody > maxMaxBody:
		return nil, fmt.Errorf("mirror.max_body %d: want 1..%d", maxBody, maxMaxBody)
	case queue < 1 || queue > maxQueue:
		return nil, fmt.Errorf("mirror.queue %d: want 1..%d", queue, maxQueue)
	case conc < 1 || conc > maxConcurrency:
		return nil, fmt.Errorf("mirror.concurrency %d: want 1..%d", conc, maxConcurrency)
	}
	m := &Filter{route: b.Route.Name, svc: svc, all: sample >= 1, threshold: record.SampleThreshold(sample),
		maxBody: maxBody, compare: rule.Compare, ignore: ignore}
	key := "mirror.pool|" + b.Route.Name + "|" + strconv.Itoa(queue) + "|" + strconv.Itoa(conc)
	m.pool = b.State.Get(key, func() (any, func()) {
		p := newPool(queue, conc)
		return p, p.close
	}).(*pool)
	m.counts = b.State.Get("mirror.counts|"+b.Route.Name, func() (any, func()) { return new(counts), nil }).(*counts)
	return m, nil
}
