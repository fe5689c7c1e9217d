package breaker

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/pipeline"
)

// DegradeSettings is a route's `degrade` setting: the answer it gives
// while its breaker (or its service's) is open, or while an operator has
// switched it on.
//
//	degrade: {status: 200, body: '{"items":[]}', headers: {X-Degraded: "1"}}
//	degrade: {cache: true, max_age: 60s}      # the last good GET answer
type DegradeSettings struct {
	Status      int               `yaml:"status"`
	Body        string            `yaml:"body"`
	ContentType string            `yaml:"content_type"` // default application/json
	Headers     map[string]string `yaml:"headers"`
	// Cache answers GETs with the last good (2xx) answer the route gave,
	// if younger than MaxAge (default 60s) and at most MaxBytes (default
	// 256 KiB); otherwise the static answer if set, else 503.
	Cache    bool          `yaml:"cache"`
	MaxAge   time.Duration `yaml:"max_age"`
	MaxBytes int           `yaml:"max_bytes"`
	// On switches the degraded answer on from the start (a planned
	// shutdown of a non-core API); the admin API can flip it at run time.
	On bool `yaml:"on"`
}

// Degrade is a route's degraded answer as a filter. It sits just before
// the breaker: when the switch is on it answers at once (nothing goes
// upstream); when the request came back refused by an open breaker it
// replaces the refusal with the degraded answer; and it keeps the last
// good GET answer when caching is on.
type Degrade struct {
	Route    string
	static   *pipeline.Static
	cache    *lastGood
	maxAge   time.Duration
	maxBytes int
	now      func() time.Time
	on       *atomic.Bool
	served   *atomic.Uint64
}

var errDegraded = pipeline.NewCanned(503, "service degraded").WithHeader("Retry-After", "5")

// Switch turns the degraded answer on or off by hand; it reports the
// previous setting.
func (d *Degrade) Switch(on bool) bool { return d.on.Swap(on) }

// On reports whether the switch is on.
func (d *Degrade) On() bool { return d.on.Load() }

// Served reports how many degraded answers the route gave.
func (d *Degrade) Served() uint64 { return d.served.Load() }

func newDegrade(b *pipeline.Build, s *DegradeSettings) (*Degrade, error) {
	if !b.Route.Forwards {
		return nil, errors.New("degrade applies only to routes that forward")
	}
	if s.Status == 0 && s.Body == "" && !s.Cache {
		return nil, errors.New("degrade needs a status and body, or cache: true")
	}
	d := &Degrade{Route: b.Route.Name, now: b.Now, maxAge: s.MaxAge, maxBytes: s.MaxBytes}
	if d.maxAge <= 0 {
		d.maxAge = time.Minute
	}
	if d.maxBytes <= 0 {
		d.maxBytes = 256 << 10
	}
	if s.Status != 0 || s.Body != "" {
		st := s.Status
		if st == 0 {
			st = 200
		}
		if st < 100 || st > 999 {
			return nil, fmt.Errorf("degrade.status %d is not an HTTP status", st)
		}
		ct := s.ContentType
		if ct == "" {
			ct = "application/json"
		}
		d.static = &pipeline.Static{Status: st, ContentType: []byte(ct), Body: []byte(s.Body)}
		for k, v := range s.Headers {
			d.static.Headers = append(d.static.Headers, [2][]byte{[]byte(k), []byte(v)})
		}
	}
	// The switch, the counter and the cached answer belong to the route
	// and survive reloads; the cache is dropped when caching is turned off.
	st := b.State.Get("degrade.switch|"+b.Route.Name, func() (any, func()) { return &degradeState{}, nil }).(*degradeState)
	if !st.configured || st.configuredOn != s.On {
		st.on.Store(s.On) // the file's word wins when it changes
		st.configured, st.configuredOn = true, s.On
	}
	d.on, d.served = &st.on, &st.served
	if s.Cache {
		d.cache = b.State.Get("degrade.cache|"+b.Route.Name, func() (any, func()) { return &lastGood{}, nil }).(*lastGood)
	}
	return d, nil
}

const decisionSwitched = "degraded (switched on)"

type degradeState struct {
	on                       atomic.Bool
	served                   atomic.Uint64
	configured, configuredOn bool
}

// Handle implements pipeline.Filter.
func (d *Degrade) Handle(c *pipeline.Ctx) pipeline.Verdict {
	if d.on.Load() {
		c.Outcome.Result = pipeline.ResultOpen
		d.answer(c)
		c.Decision = decisionSwitched
		return pipeline.Stop
	}
	return pipeline.Continue
}

// HandleResponse implements pipeline.ResponseFilter.
func (d *Degrade) HandleResponse(c *pipeline.Ctx) {
	switch {
	case c.Outcome.Result == pipeline.ResultOpen:
		if c.Decision != decisionSwitched {
			d.answer(c)
			c.Decision = "degraded (breaker open)"
		}
	case d.cache != nil && c.Outcome.Result == pipeline.ResultOK && c.Req.Header.IsGet():
		if st := c.Resp.StatusCode(); st >= 200 && st < 300 && !c.Resp.IsBodyStream() {
			d.cache.offer(c, d.now(), d.maxBytes)
		}
	}
}

// answer writes the degraded answer: the cached one for a GET when fresh,
// else the static one, else 503.
func (d *Degrade) answer(c *pipeline.Ctx) {
	d.served.Add(1)
	if d.cache != nil && c.Req.Header.IsGet() && d.cache.writeTo(c, d.now(), d.maxAge) {
		return
	}
	if d.static != nil {
		d.static.WriteTo(c)
		return
	}
	errDegraded.WriteTo(c)
}

// lastGood is a route's last good GET answer. It is refreshed at most once
// a second, so caching costs one copy a second, not one per request.
type lastGood struct {
	mu     sync.RWMutex
	at     time.Time
	status int
	ctype  []byte
	body   []byte
	next   atomic.Int64 // unix ns before which no refresh is taken
}

func (l *lastGood) offer(c *pipeline.Ctx, now time.Time, maxBytes int) {
	n := now.UnixNano()
	if next := l.next.Load(); n < next || !l.next.CompareAndSwap(next, n+int64(time.Second)) {
		return
	}
	body := c.Resp.Body()
	if len(body) > maxBytes {
		return
	}
	l.mu.Lock()
	l.at, l.status = now, c.Resp.StatusCode()
	l.ctype = append(l.ctype[:0], c.Resp.Header.ContentType()...)
	l.body = append(l.body[:0], body...)
	l.mu.Unlock()
}

var (
	strDegraded = []byte("X-Degraded")
	strCache    = []byte("cache")
)

func (l *lastGood) writeTo(c *pipeline.Ctx, now time.Time, maxAge time.Duration) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.status == 0 || now.Sub(l.at) > maxAge {
		return false
	}
	r := c.Resp
	r.Reset()
	r.SetStatusCode(l.status)
	r.Header.SetContentTypeBytes(l.ctype)
	r.Header.SetBytesKV(strDegraded, strCache)
	r.SetBody(l.body) // a copy: the cache may be refreshed meanwhile
	return true
}
