package auth

import (
	"strconv"
	"sync"
	"time"

	"github.com/tollgate/tollgate/internal/clock"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/sign"
)

// SigChecker checks one signed request (see package sign). One checker is
// used by one goroutine at a time; the filter pools them.
type SigChecker interface {
	Check(secret, query, form, ts, nonce, sig []byte) bool
}

// SignatureConfig configures the signed-request filter.
type SignatureConfig struct {
	Consumers *Consumers
	Nonces    *NonceStore
	Clock     *clock.Clock
	// Window is the largest allowed |server time − X-Timestamp|; default
	// 300s. Nonces must be remembered for twice this (NonceStore TTL).
	Window time.Duration
	// Route is the route's name, for consumers' route allow-lists.
	Route      string
	NewChecker func() SigChecker
}

// Signature verifies the open platform's signed requests (SPEC §3):
// X-App-Key, X-Timestamp, X-Nonce and X-Sign, an HMAC-SHA256 over the
// sorted request parameters, the timestamp and the nonce. The nonce is
// claimed only after the signature verifies, so forged requests cannot burn
// a client's nonces.
type Signature struct {
	cfg      SignatureConfig
	window   int64 // seconds
	checkers sync.Pool
}

// NewSignature builds the filter.
func NewSignature(cfg SignatureConfig) *Signature {
	if cfg.Window <= 0 {
		cfg.Window = 300 * time.Second
	}
	s := &Signature{cfg: cfg, window: int64(cfg.Window / time.Second)}
	s.checkers.New = func() any { return cfg.NewChecker() }
	return s
}

var (
	hdrAppKey    = []byte("X-App-Key")
	hdrTimestamp = []byte("X-Timestamp")
	hdrNonce     = []byte("X-Nonce")
	hdrSign      = []byte("X-Sign")

	errNoAppKey     = pipeline.NewCanned(401, "missing X-App-Key header")
	errNoTimestamp  = pipeline.NewCanned(401, "missing X-Timestamp header")
	errNoNonce      = pipeline.NewCanned(401, "missing X-Nonce header")
	errNoSign       = pipeline.NewCanned(401, "missing X-Sign header")
	errBadTimestamp = pipeline.NewCanned(401, "X-Timestamp must be unix seconds")
	errBadNonce     = pipeline.NewCanned(401, "X-Nonce must be 1..64 printable ASCII characters")
	errUnknownApp   = pipeline.NewCanned(401, "unknown app key")
	errDisabledApp  = pipeline.NewCanned(401, "app key disabled")
	errBadSign      = pipeline.NewCanned(401, "signature does not match")
	errReplayed     = pipeline.NewCanned(401, "replayed nonce")
	errFormTooLarge = pipeline.NewCanned(401, "form body too large to verify its signature")
	errNotAllowed   = pipeline.NewCanned(403, "consumer not allowed on this route")
)

// Handle implements pipeline.Filter.
func (s *Signature) Handle(c *pipeline.Ctx) pipeline.Verdict {
	h := &c.Req.Header
	appKey := h.PeekBytes(hdrAppKey)
	ts := h.PeekBytes(hdrTimestamp)
	nonce := h.PeekBytes(hdrNonce)
	sig := h.PeekBytes(hdrSign)
	switch {
	case len(appKey) == 0:
		return c.Reject(errNoAppKey)
	case len(ts) == 0:
		return c.Reject(errNoTimestamp)
	case len(nonce) == 0:
		return c.Reject(errNoNonce)
	case len(sig) == 0:
		return c.Reject(errNoSign)
	}
	when, ok := parseUnix(ts)
	if !ok {
		return c.Reject(errBadTimestamp)
	}
	now := s.cfg.Clock.Now()
	if d := now.Unix() - when; d > s.window || d < -s.window {
		s.rejectSkew(c, now.Unix())
		return pipeline.Stop
	}
	if !printableBytes(nonce, 64) {
		return c.Reject(errBadNonce)
	}
	consumer := s.cfg.Consumers.Lookup(appKey)
	if consumer == nil {
		return c.Reject(errUnknownApp)
	}
	if !consumer.Enabled {
		return c.Reject(errDisabledApp)
	}
	var form []byte
	if sign.IsForm(h.Method(), h.ContentType()) {
		if c.Req.IsBodyStream() {
			return c.Reject(errFormTooLarge)
		}
		form = c.Req.Body()
	}
	checker := s.checkers.Get().(SigChecker)
	ok = checker.Check(consumer.Secret, c.Req.URI().QueryString(), form, ts, nonce, sig)
	s.checkers.Put(checker)
	if !ok {
		return c.Reject(errBadSign)
	}
	if consumer.Routes != nil && !consumer.Routes[s.cfg.Route] {
		return c.Reject(errNotAllowed)
	}
	if !s.cfg.Nonces.Claim(appKey, nonce, now) {
		return c.Reject(errReplayed)
	}
	c.Consumer = consumer.AppKey
	return pipeline.Continue
}

var (
	skewPrefix = []byte(`{"code":401,"message":"timestamp outside the allowed window","server_time":`)
	skewTrace  = []byte(`,"trace_id":"`)
	skewEnd    = []byte(`"}`)
	jsonCT     = []byte("application/json")
)

// rejectSkew answers a stale or future timestamp with the server's time,
// so clients can correct their clocks.
func (s *Signature) rejectSkew(c *pipeline.Ctx, now int64) {
	r := c.Resp
	r.Reset()
	r.SetStatusCode(401)
	r.Header.SetContentTypeBytes(jsonCT)
	r.AppendBody(skewPrefix)
	c.Scratch = strconv.AppendInt(c.Scratch[:0], now, 10)
	r.AppendBody(c.Scratch)
	r.AppendBody(skewTrace)
	r.AppendBody(c.Trace.TraceHex[:])
	r.AppendBody(skewEnd)
	c.Decision = "timestamp outside the allowed window"
}

// parseUnix reads 1..12 decimal digits.
func parseUnix(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 12 {
		return 0, false
	}
	var n int64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		n = n*10 + int64(ch-'0')
	}
	return n, true
}
