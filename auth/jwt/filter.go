// Package jwt is the gateway's JWT authentication: the filter that takes a
// bearer token, verifies it (HS256, RS256, ES256, with the algorithm the
// key decides), checks its time and audience claims, consults the
// revocation set, and names the caller ("jwt:" + subject). Verified tokens
// are cached (internal/tokencache), so a repeated token costs a hash and a
// lookup.
package jwt

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tollgate/tollgate/internal/ascii"

	"github.com/cespare/xxhash/v2"
	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/internal/tokencache"
	"github.com/tollgate/tollgate/pipeline"
)

// JWT algorithms the gateway verifies (RFC 7518 §3.1). Anything else,
// "none" included, is refused.
const (
	AlgHS256 = "HS256"
	AlgRS256 = "RS256"
	AlgES256 = "ES256"
)

// Revocations answers whether a token is revoked, by its id ("jti") or by
// its subject ("sub"). It is asked on every request that carries an
// otherwise valid token, cached or not, so a revocation takes effect as
// soon as the implementation sees it.
//
// It is given the token's revocation members, whole whatever their length:
// jti is RevokedJTIPrefix + the token's "jti" (empty when the token has
// none) and sub is RevokedSubPrefix + its "sub"; a set of such members
// answers with one lookup each. Revoked must be safe for concurrent use,
// must not block on I/O, should not allocate, and must neither keep nor
// modify the slices it is given.
type Revocations interface {
	Revoked(jti, sub []byte) bool
}

// The revocation members of a token (see Revocations): the prefix and the
// claim's value, byte for byte.
const (
	RevokedJTIPrefix = "jti:"
	RevokedSubPrefix = "sub:"
)

// ConsumerPrefix starts Ctx.Consumer (and so X-Consumer) for a caller
// identified by a JWT: "jwt:" + the token's subject. App keys may not start
// with it (NewConsumers), so a token's subject is never taken for a signed
// consumer's app key.
const ConsumerPrefix = "jwt:"

// Config configures the JWT filter. Zero fields take the defaults beside
// them.
type Config struct {
	// Keys are the keys tokens may be signed with; at least one.
	Keys []Key
	// Issuer, when not "", must equal the token's "iss".
	Issuer string
	// Audience, when not "", must be the token's "aud" or one of its
	// entries.
	Audience string
	// Leeway is the clock skew allowed on "exp" and "nbf"; default 0, at
	// most 24h.
	Leeway time.Duration
	// ExpOptional accepts tokens without "exp", which then never expire
	// (only a revocation stops them). By default (false) such a token is
	// refused with ErrJWTNoExpiry.
	ExpOptional bool
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Revoked, when not nil, is asked about every accepted token.
	Revoked Revocations
	// CacheSize bounds the verified-token cache, in tokens; default 65536.
	// Each entry keeps a copy of its token, so memory is about
	// CacheSize × (token length + 200 bytes).
	CacheSize int
}

// DefaultJWTCacheSize is Config.CacheSize's default.
const DefaultJWTCacheSize = 65536

// maxJWTLen bounds the token accepted at all (and so what one cache entry
// holds); a longer Authorization value is refused as malformed.
const maxJWTLen = 16 << 10

// maxJWTLeeway bounds Config.Leeway.
const maxJWTLeeway = 24 * time.Hour

// Errors Verify returns, one per cause; Handle answers each with its own
// 401 message.
var (
	ErrJWTMissing     = errors.New("auth: missing bearer token")
	ErrJWTMalformed   = errors.New("auth: malformed JWT")
	ErrJWTUnknownKey  = errors.New("auth: unknown JWT key id")
	ErrJWTAlgorithm   = errors.New("auth: JWT algorithm not accepted")
	ErrJWTSignature   = errors.New("auth: invalid JWT signature")
	ErrJWTNoSubject   = errors.New("auth: JWT has no subject")
	ErrJWTIssuer      = errors.New("auth: wrong JWT issuer")
	ErrJWTAudience    = errors.New("auth: wrong JWT audience")
	ErrJWTExpired     = errors.New("auth: JWT expired")
	ErrJWTNoExpiry    = errors.New("auth: JWT has no expiry (exp claim required)")
	ErrJWTNotYetValid = errors.New("auth: JWT not yet valid")
	ErrJWTRevoked     = errors.New("auth: JWT revoked")
)

const jwtHdrAuthorization = "Authorization"

// jwtResult is the outcome of a check; it indexes the errors and the
// canned answers, so failing costs no allocation either.
type jwtResult uint8

const (
	jwtOK jwtResult = iota
	jwtMissing
	jwtMalformed
	jwtUnknownKey
	jwtAlgorithm
	jwtSignature
	jwtNoSubject
	jwtIssuer
	jwtAudience
	jwtExpired
	jwtNoExpiry
	jwtNotYetValid
	jwtRevoked
	jwtResults
)

var jwtErrors = [jwtResults]error{
	jwtMissing:     ErrJWTMissing,
	jwtMalformed:   ErrJWTMalformed,
	jwtUnknownKey:  ErrJWTUnknownKey,
	jwtAlgorithm:   ErrJWTAlgorithm,
	jwtSignature:   ErrJWTSignature,
	jwtNoSubject:   ErrJWTNoSubject,
	jwtIssuer:      ErrJWTIssuer,
	jwtAudience:    ErrJWTAudience,
	jwtExpired:     ErrJWTExpired,
	jwtNoExpiry:    ErrJWTNoExpiry,
	jwtNotYetValid: ErrJWTNotYetValid,
	jwtRevoked:     ErrJWTRevoked,
}

var jwtCanned = [jwtResults]*pipeline.Canned{
	jwtMissing:     pipeline.NewCanned(401, "missing bearer token"),
	jwtMalformed:   pipeline.NewCanned(401, "malformed JWT"),
	jwtUnknownKey:  pipeline.NewCanned(401, "unknown JWT key id"),
	jwtAlgorithm:   pipeline.NewCanned(401, "JWT algorithm not accepted"),
	jwtSignature:   pipeline.NewCanned(401, "invalid JWT signature"),
	jwtNoSubject:   pipeline.NewCanned(401, "JWT has no subject"),
	jwtIssuer:      pipeline.NewCanned(401, "wrong JWT issuer"),
	jwtAudience:    pipeline.NewCanned(401, "wrong JWT audience"),
	jwtExpired:     pipeline.NewCanned(401, "JWT expired"),
	jwtNoExpiry:    pipeline.NewCanned(401, "JWT has no expiry (exp claim required)"),
	jwtNotYetValid: pipeline.NewCanned(401, "JWT not yet valid"),
	jwtRevoked:     pipeline.NewCanned(401, "JWT revoked"),
}

var (
	jwtHdrWWWAuthenticate = []byte("WWW-Authenticate")
	// RFC 6750 §3: no error code when the request carried no token.
	jwtChallengeBearer  = []byte("Bearer")
	jwtChallengeInvalid = []byte(`Bearer error="invalid_token"`)
)

// JWT is the bearer-token filter (a pipeline.Filter). It is built once per
// config snapshot and safe for concurrent use; its cache of verified tokens
// lives as long as it does, so a new key set starts with an empty cache.
//
// A token's signature is checked once: the token's bytes, its subject, id,
// "exp" and "nbf" are then kept in a bounded cache. Every request, cached
// or not, is checked against the clock and the revocation list; a cached
// one costs a hash, a map lookup and a byte comparison, and allocates
// nothing. Only tokens whose signature, issuer and audience are good are
// cached (expired ones too, so a client retrying an expired token costs
// no signature check); forged or foreign tokens are verified every time,
// since their bytes are the attacker's to vary and caching them would only
// let them push good tokens out.
type Filter struct {
	keys        []jwtKey
	issuer      string
	audience    string
	leeway      int64 // ns
	expOptional bool
	now         func() time.Time
	revoked     Revocations
	cache       *tokencache.Cache[*jwtEntry]
}

// NewJWT checks cfg and builds the filter. Keys must be usable for their
// algorithm: HS256 secrets of at least 32 bytes, RSA keys of at least 2048
// bits, ECDSA keys on P-256; non-empty key ids must be unique.
//
// Key selection: a token naming a kid is checked with the key of that id,
// or, when no key has it, with the keys that have no id. A token without a
// kid is checked with the only key when there is one, else with every key
// of the token's algorithm. In every case the key's algorithm must equal
// the token's "alg" header, so an HS256 key never verifies an RS256 or
// ES256 token and the reverse (no algorithm confusion), and "none" is
// never accepted. Headers that point at keys elsewhere (jku, jwk, x5u, x5c)
// are ignored, and a token with a "crit" header is refused.
func New(cfg Config) (*Filter, error) {
	if len(cfg.Keys) == 0 {
		return nil, errors.New("auth: jwt needs at least one key")
	}
	if cfg.Leeway < 0 || cfg.Leeway > maxJWTLeeway {
		return nil, fmt.Errorf("auth: jwt leeway %v must be between 0 and %v", cfg.Leeway, maxJWTLeeway)
	}
	if cfg.CacheSize < 0 {
		return nil, fmt.Errorf("auth: jwt cache size %d must not be negative", cfg.CacheSize)
	}
	j := &Filter{
		issuer:      cfg.Issuer,
		audience:    cfg.Audience,
		leeway:      int64(cfg.Leeway),
		expOptional: cfg.ExpOptional,
		now:         cfg.Now,
		revoked:     cfg.Revoked,
	}
	if j.now == nil {
		j.now = time.Now
	}
	size := cfg.CacheSize
	if size == 0 {
		size = DefaultJWTCacheSize
	}
	j.cache = tokencache.New[*jwtEntry](size)
	seen := make(map[string]bool, len(cfg.Keys))
	for i, k := range cfg.Keys {
		ck, err := compileJWTKey(k)
		if err != nil {
			return nil, fmt.Errorf("auth: jwt key %d (kid %q): %w", i, k.KID, err)
		}
		if k.KID != "" {
			if seen[k.KID] {
				return nil, fmt.Errorf("auth: jwt key id %q is defined twice", k.KID)
			}
			seen[k.KID] = true
		}
		j.keys = append(j.keys, ck)
	}
	return j, nil
}

// Handle implements pipeline.Filter. It reads "Authorization: Bearer
// <token>" (the scheme in any case) and, for a good token, sets c.UserID
// to its subject and c.Consumer to ConsumerPrefix + the subject, and
// continues; otherwise it answers 401 with the cause and a
// WWW-Authenticate challenge (RFC 6750). More than one Authorization field
// is refused as malformed. Both strings are built when the token is
// cached, so setting them allocates nothing.
func (j *Filter) Handle(c *pipeline.Ctx) pipeline.Verdict {
	tok, r := bearerToken(&c.Req.Header)
	var e *jwtEntry
	if r == jwtOK {
		e, r = j.check(tok, j.now().UnixNano())
	}
	if r != jwtOK {
		c.Reject(jwtCanned[r])
		if r == jwtMissing {
			c.Resp.Header.SetBytesKV(jwtHdrWWWAuthenticate, jwtChallengeBearer)
		} else {
			c.Resp.Header.SetBytesKV(jwtHdrWWWAuthenticate, jwtChallengeInvalid)
		}
		return pipeline.Stop
	}
	c.Consumer = e.consumer
	c.UserID = e.sub
	return pipeline.Continue
}

// Verify checks token (the compact JWS, without "Bearer ") exactly as
// Handle does, against the clock and the revocation list, and returns its
// claims or one of the ErrJWT errors. token itself is not retained (the
// cache keeps its own copy); checking a cached token allocates nothing.
func (j *Filter) Verify(token []byte) (Claims, error) {
	e, r := j.check(token, j.now().UnixNano())
	if r != jwtOK {
		return Claims{}, jwtErrors[r]
	}
	cl := Claims{Subject: e.sub, ID: e.jti}
	if e.exp != math.MaxInt64 {
		cl.Expires = time.Unix(0, e.exp)
	}
	if e.nbf != math.MinInt64 {
		cl.NotBefore = time.Unix(0, e.nbf)
	}
	return cl, nil
}

// check verifies tok at now (unix ns), from the cache when it can.
func (j *Filter) check(tok []byte, now int64) (*jwtEntry, jwtResult) {
	if len(tok) == 0 {
		return nil, jwtMissing
	}
	if len(tok) > maxJWTLen {
		return nil, jwtMalformed
	}
	h := xxhash.Sum64(tok)
	e, hit := j.cache.Get(h, tok)
	if !hit {
		var r jwtResult
		if e, r = j.verify(tok); r != jwtOK {
			return nil, r
		}
		e.hash = h
		j.cache.Put(e, now)
	}
	if !e.hasExp && !j.expOptional {
		return nil, jwtNoExpiry
	}
	// exp: valid while now < exp (RFC 7519 §4.1.4); nbf: from nbf on.
	if now-j.leeway >= e.exp {
		return nil, jwtExpired
	}
	if jwtSatAdd(now, j.leeway) < e.nbf {
		return nil, jwtNotYetValid
	}
	if j.revoked != nil && j.revoked.Revoked(e.jtiMember, e.subMember) {
		return nil, jwtRevoked
	}
	return e, jwtOK
}

// bearerToken finds the one Authorization field and returns its bearer
// token. Names compare case-insensitively whether or not the transport
// normalizes them.
func bearerToken(h *fasthttp.RequestHeader) ([]byte, jwtResult) {
	// Field names are normalized by the transports, so PeekAll matches
	// any spelling the client used. (All would parse, and so rewrite, the
	// Cookie field the upstream gets.)
	all := h.PeekAll(jwtHdrAuthorization)
	switch {
	case len(all) == 0:
		return nil, jwtMissing
	case len(all) > 1:
		return nil, jwtMalformed
	}
	v := all[0]
	v = ascii.TrimOWS(v)
	const scheme = "Bearer"
	if len(v) <= len(scheme) || !ascii.EqualFold(v[:len(scheme)], scheme) || (v[len(scheme)] != ' ' && v[len(scheme)] != '\t') {
		// Another scheme (Basic, Signature, ...) carries no bearer token.
		return nil, jwtMissing
	}
	v = ascii.TrimOWS(v[len(scheme):])
	if len(v) == 0 {
		return nil, jwtMissing
	}
	return v, jwtOK
}
