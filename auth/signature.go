package auth

import (
	"bytes"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate/tollgate/internal/jsonstr"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/sign"
	"github.com/tollgate/tollgate/trace"
)

// SigChecker checks one signed request (see package sign; *sign.Verifier
// is one). One checker is used by one goroutine at a time; the filter pools
// them.
type SigChecker interface {
	// Verify checks a scheme v1 signature, VerifyV2 a scheme v2 one; both
	// return nil on a match, else one of package sign's errors.
	Verify(secret, query, form, ts, nonce, sig []byte) error
	VerifyV2(secret []byte, r *sign.Parts, sig []byte) error
	// RepeatedKey is, after sign.ErrRepeated, the key repeated with
	// different values, and whether it was cut short.
	RepeatedKey() (key []byte, cut bool)
}

// SignatureConfig configures the signed-request filter.
type SignatureConfig struct {
	Consumers *Consumers
	Nonces    *NonceStore
	// Now is the clock, non-decreasing (the build environment's).
	Now func() time.Time
	// Window is the largest allowed |server time − X-Timestamp|; default
	// 300s. Nonces must be remembered for twice this (NonceStore TTL).
	Window time.Duration
	// Route is the route's name, for consumers' route allow-lists.
	Route string
	// NewChecker makes the checkers the filter pools; default
	// sign.NewVerifier.
	NewChecker func() SigChecker
}

// Signature verifies the open platform's signed requests (SPEC §3):
// X-App-Key, X-Timestamp, X-Nonce and X-Sign, an HMAC-SHA256 over the
// sorted request parameters, the timestamp and the nonce (scheme v1), or,
// for a consumer with SignV2, over the method, path, parameters, timestamp,
// nonce and body digest (scheme v2). A parameter repeated with different
// values is refused with 400 before any of that, since only one of its
// values could be signed. The nonce is claimed only after the signature
// verifies, so forged requests cannot burn a client's nonces.
type Signature struct {
	cfg    SignatureConfig
	window int64 // seconds
	work   sync.Pool
}

// sigWork is what the filter pools: a checker, and the v2 request view
// handed to it by pointer (so building it allocates nothing).
type sigWork struct {
	checker SigChecker
	parts   sign.Parts
	claim   clusterClaim
}

// NewSignature builds the filter.
func NewSignature(cfg SignatureConfig) *Signature {
	if cfg.Window <= 0 {
		cfg.Window = 300 * time.Second
	}
	if cfg.NewChecker == nil {
		cfg.NewChecker = func() SigChecker { return sign.NewVerifier() }
	}
	s := &Signature{cfg: cfg, window: int64(cfg.Window / time.Second)}
	s.work.New = func() any { return &sigWork{checker: cfg.NewChecker()} }
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
	errBodyTooLarge = pipeline.NewCanned(401, "body too large to verify its signature")
	errPathForm     = pipeline.NewCanned(401, "path not in canonical form: unreserved characters unescaped, other escapes in uppercase hex, no dot segments, no //")
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
	now := s.cfg.Now()
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
	w := s.work.Get().(*sigWork)
	ok = s.verify(c, w, consumer, ts, nonce, sig)
	if !ok {
		s.work.Put(w)
		return pipeline.Stop
	}
	if consumer.Routes != nil && !consumer.Routes[s.cfg.Route] {
		s.work.Put(w)
		return c.Reject(errNotAllowed)
	}
	fresh := s.cfg.Nonces.claimHere(appKey, nonce, now)
	if fresh && s.cfg.Nonces.cluster != nil {
		// The cluster's claim waits on Redis (bounded by the cluster's
		// budget): through the context, as every wait does.
		w.claim = clusterClaim{store: s.cfg.Nonces, appKey: appKey, nonce: nonce}
		span := c.StartSpan(trace.SpanNonceClaim)
		c.Block(&w.claim)
		c.EndSpan(span)
		fresh = w.claim.fresh
		w.claim = clusterClaim{}
	}
	s.work.Put(w)
	if !fresh {
		return c.Reject(errReplayed)
	}
	c.Consumer = consumer.AppKey
	return pipeline.Continue
}

// verify checks the request's signature by the consumer's scheme with w,
// and answers a refusal itself; it reports whether the request may go on.
// It reads the target as the gateway routes and forwards it (c.Target,
// filled before any filter runs): the query byte for byte, and for v2 the
// canonical path.
func (s *Signature) verify(c *pipeline.Ctx, w *sigWork, consumer *Consumer, ts, nonce, sig []byte) bool {
	h := &c.Req.Header
	var err error
	if consumer.SignV2 {
		if c.Req.IsBodyStream() {
			c.Reject(errBodyTooLarge)
			return false
		}
		w.parts = sign.Parts{Method: h.Method(), Path: c.Target.Path, Query: c.Target.Query,
			ContentType: h.ContentType(), Body: c.Req.Body(), Timestamp: ts, Nonce: nonce}
		err = w.checker.VerifyV2(consumer.Secret, &w.parts, sig)
		w.parts = sign.Parts{} // keep no request bytes in the pool
		if err == sign.ErrSignature && !sentAsCanonical(h.RequestURI(), c.Target.Path) {
			// The client signed the path it sent, which is not the one
			// the gateway routes: say so rather than "does not match".
			err = sign.ErrPath
		}
	} else {
		var form []byte
		if sign.IsForm(h.Method(), h.ContentType()) {
			if c.Req.IsBodyStream() {
				c.Reject(errFormTooLarge)
				return false
			}
			form = c.Req.Body()
		}
		err = w.checker.Verify(consumer.Secret, c.Target.Query, form, ts, nonce, sig)
	}
	switch err {
	case nil:
		return true
	case sign.ErrRepeated:
		key, cut := w.checker.RepeatedKey()
		rejectRepeated(c, key, cut)
	case sign.ErrPath:
		c.Reject(errPathForm)
	default:
		c.Reject(errBadSign)
	}
	return false
}

// sentAsCanonical reports whether the path of the request-target uri
// (origin or absolute form) is the canonical path canon byte for byte; an
// empty path counts as "/".
func sentAsCanonical(uri, canon []byte) bool {
	if len(uri) > 0 && uri[0] != '/' {
		if i := bytes.Index(uri, schemeSep); i >= 0 {
			uri = uri[i+len(schemeSep):]
			if j := bytes.IndexAny(uri, "/?"); j >= 0 {
				uri = uri[j:]
			} else {
				uri = nil
			}
		}
	}
	if q := bytes.IndexByte(uri, '?'); q >= 0 {
		uri = uri[:q]
	}
	if len(uri) == 0 {
		uri = slash
	}
	return bytes.Equal(uri, canon)
}

var (
	schemeSep = []byte("://")
	slash     = []byte("/")
)

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

var (
	repeatedPrefix = []byte(`{"code":400,"message":"repeated parameter with different values: `)
	repeatedCut    = []byte("...")
	repeatedTrace  = []byte(`","trace_id":"`)
)

// repeatedDecision is the access log's word for rejectRepeated.
const repeatedDecision = "repeated parameter with different values"

// rejectRepeated answers 400 naming the repeated key: at most
// sign.MaxRepeatedKey bytes of it ("..." when cut), JSON-escaped.
func rejectRepeated(c *pipeline.Ctx, key []byte, cut bool) {
	r := c.Resp
	r.Reset()
	r.SetStatusCode(400)
	r.Header.SetContentTypeBytes(jsonCT)
	r.AppendBody(repeatedPrefix)
	// The key goes inside the message's string: its quotes are the
	// message's.
	quoted := jsonstr.Append(c.Scratch[:0], key)
	c.Scratch = quoted[1 : len(quoted)-1]
	if cut {
		c.Scratch = append(c.Scratch, repeatedCut...)
	}
	r.AppendBody(c.Scratch)
	r.AppendBody(repeatedTrace)
	r.AppendBody(c.Trace.TraceHex[:])
	r.AppendBody(skewEnd)
	c.Decision = repeatedDecision
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
