package auth

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/tollgate/tollgate/internal/ascii"
	"math"
	"math/big"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/pipeline"
)

// JWT algorithms the gateway verifies (RFC 7518 §3.1). Anything else,
// "none" included, is refused.
const (
	AlgHS256 = "HS256"
	AlgRS256 = "RS256"
	AlgES256 = "ES256"
)

// JWTKey is one key a JWT may be signed with. The key decides the
// algorithm: a token is verified only with the algorithm of the key that
// verifies it, whatever its header claims.
type JWTKey struct {
	// KID is the key id tokens name in their "kid" header; "" for a key
	// without one, which tokens naming an unknown kid may still use (see
	// NewJWT).
	KID string
	// Alg is AlgHS256, AlgRS256 or AlgES256; "" infers it from the key
	// material (Secret → HS256, *rsa.PublicKey → RS256, *ecdsa.PublicKey on
	// P-256 → ES256).
	Alg string
	// Secret is the HS256 shared secret, at least 32 bytes (RFC 7518 §3.2).
	Secret []byte
	// Public is the RS256 key (*rsa.PublicKey, at least 2048 bits) or the
	// ES256 key (*ecdsa.PublicKey on P-256).
	Public crypto.PublicKey
}

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

// JWTConsumerPrefix starts Ctx.Consumer (and so X-Consumer) for a caller
// identified by a JWT: "jwt:" + the token's subject. App keys may not start
// with it (NewConsumers), so a token's subject is never taken for a signed
// consumer's app key.
const JWTConsumerPrefix = "jwt:"

// JWTConfig configures the JWT filter. Zero fields take the defaults beside
// them.
type JWTConfig struct {
	// Keys are the keys tokens may be signed with; at least one.
	Keys []JWTKey
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

// DefaultJWTCacheSize is JWTConfig.CacheSize's default.
const DefaultJWTCacheSize = 65536

// maxJWTLen bounds the token accepted at all (and so what one cache entry
// holds); a longer Authorization value is refused as malformed.
const maxJWTLen = 16 << 10

// maxJWTLeeway bounds JWTConfig.Leeway.
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

// Claims is what a verified token says about its caller. Its strings point
// into the verified-token cache and are immutable.
type Claims struct {
	Subject   string    // "sub"
	ID        string    // "jti", "" when absent
	Expires   time.Time // "exp", zero when absent
	NotBefore time.Time // "nbf", zero when absent
}

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
type JWT struct {
	keys        []jwtKey
	issuer      string
	audience    string
	leeway      int64 // ns
	expOptional bool
	now         func() time.Time
	revoked     Revocations
	cache       *jwtCache
}

type jwtKey struct {
	kid    string
	alg    string
	secret []byte
	rsa    *rsa.PublicKey
	ec     *ecdsa.PublicKey
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
func NewJWT(cfg JWTConfig) (*JWT, error) {
	if len(cfg.Keys) == 0 {
		return nil, errors.New("auth: jwt needs at least one key")
	}
	if cfg.Leeway < 0 || cfg.Leeway > maxJWTLeeway {
		return nil, fmt.Errorf("auth: jwt leeway %v must be between 0 and %v", cfg.Leeway, maxJWTLeeway)
	}
	if cfg.CacheSize < 0 {
		return nil, fmt.Errorf("auth: jwt cache size %d must not be negative", cfg.CacheSize)
	}
	j := &JWT{
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
	j.cache = newJWTCache(size)
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

func compileJWTKey(k JWTKey) (jwtKey, error) {
	alg := k.Alg
	if alg == "" {
		switch pub := k.Public.(type) {
		case nil:
			alg = AlgHS256
		case *rsa.PublicKey:
			alg = AlgRS256
		case *ecdsa.PublicKey:
			alg = AlgES256
		default:
			return jwtKey{}, fmt.Errorf("unsupported public key type %T", pub)
		}
	}
	ck := jwtKey{kid: k.KID, alg: alg}
	switch alg {
	case AlgHS256:
		if k.Public != nil {
			return jwtKey{}, errors.New("an HS256 key takes a secret, not a public key")
		}
		if len(k.Secret) < 32 {
			return jwtKey{}, fmt.Errorf("HS256 secret has %d bytes, needs at least 32", len(k.Secret))
		}
		ck.secret = bytes.Clone(k.Secret)
	case AlgRS256:
		pub, ok := k.Public.(*rsa.PublicKey)
		if !ok || pub == nil || pub.N == nil {
			return jwtKey{}, fmt.Errorf("an RS256 key needs an *rsa.PublicKey, got %T", k.Public)
		}
		if len(k.Secret) > 0 {
			return jwtKey{}, errors.New("an RS256 key takes a public key, not a secret")
		}
		if pub.N.BitLen() < 2048 {
			return jwtKey{}, fmt.Errorf("RSA key has %d bits, needs at least 2048", pub.N.BitLen())
		}
		if pub.E < 3 || pub.E&1 == 0 {
			return jwtKey{}, fmt.Errorf("RSA public exponent %d is invalid", pub.E)
		}
		ck.rsa = pub
	case AlgES256:
		pub, ok := k.Public.(*ecdsa.PublicKey)
		if !ok || pub == nil {
			return jwtKey{}, fmt.Errorf("an ES256 key needs an *ecdsa.PublicKey, got %T", k.Public)
		}
		if len(k.Secret) > 0 {
			return jwtKey{}, errors.New("an ES256 key takes a public key, not a secret")
		}
		if pub.Curve != elliptic.P256() {
			return jwtKey{}, errors.New("an ES256 key must be on curve P-256")
		}
		if _, err := pub.Bytes(); err != nil {
			return jwtKey{}, fmt.Errorf("invalid P-256 key: %w", err)
		}
		ck.ec = pub
	default:
		return jwtKey{}, fmt.Errorf("unsupported algorithm %q (want %s, %s or %s)", alg, AlgHS256, AlgRS256, AlgES256)
	}
	return ck, nil
}

// Handle implements pipeline.Filter. It reads "Authorization: Bearer
// <token>" (the scheme in any case) and, for a good token, sets c.UserID
// to its subject and c.Consumer to JWTConsumerPrefix + the subject, and
// continues; otherwise it answers 401 with the cause and a
// WWW-Authenticate challenge (RFC 6750). More than one Authorization field
// is refused as malformed. Both strings are built when the token is
// cached, so setting them allocates nothing.
func (j *JWT) Handle(c *pipeline.Ctx) pipeline.Verdict {
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
func (j *JWT) Verify(token []byte) (Claims, error) {
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
func (j *JWT) check(tok []byte, now int64) (*jwtEntry, jwtResult) {
	if len(tok) == 0 {
		return nil, jwtMissing
	}
	if len(tok) > maxJWTLen {
		return nil, jwtMalformed
	}
	h := xxhash.Sum64(tok)
	e := j.cache.get(h, tok)
	if e == nil {
		var r jwtResult
		if e, r = j.verify(tok); r != jwtOK {
			return nil, r
		}
		e.hash = h
		j.cache.put(e, now)
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

func jwtSatAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
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
	v = jwtTrimOWS(v)
	const scheme = "Bearer"
	if len(v) <= len(scheme) || !ascii.EqualFold(v[:len(scheme)], scheme) || (v[len(scheme)] != ' ' && v[len(scheme)] != '\t') {
		// Another scheme (Basic, Signature, ...) carries no bearer token.
		return nil, jwtMissing
	}
	v = jwtTrimOWS(v[len(scheme):])
	if len(v) == 0 {
		return nil, jwtMissing
	}
	return v, jwtOK
}

func jwtTrimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

var jwtB64 = base64.RawURLEncoding.Strict()

// jwtChar marks the bytes a compact JWS may contain.
var jwtChar = func() (t [256]bool) {
	for _, ch := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.") {
		t[ch] = true
	}
	return t
}()

// jwtDecode decodes one non-empty base64url part of a token into the front
// of buf and returns it and the rest of buf.
func jwtDecode(buf, part []byte) (out, rest []byte, ok bool) {
	if len(part) == 0 {
		return nil, buf, false
	}
	n, err := jwtB64.Decode(buf, part)
	if err != nil {
		return nil, buf, false
	}
	return buf[:n:n], buf[n:], true
}

// verify does the full check of an uncached token: structure, header, key
// selection, signature, and the claims that do not depend on the clock.
// It returns a new cache entry (without its hash).
func (j *JWT) verify(tok []byte) (*jwtEntry, jwtResult) {
	// Only the base64url alphabet and the two dots: the decoder would
	// otherwise skip line breaks, letting two spellings carry one token.
	for _, ch := range tok {
		if !jwtChar[ch] {
			return nil, jwtMalformed
		}
	}
	dot1 := bytes.IndexByte(tok, '.')
	if dot1 < 0 {
		return nil, jwtMalformed
	}
	dot2 := bytes.IndexByte(tok[dot1+1:], '.')
	if dot2 < 0 {
		return nil, jwtMalformed
	}
	dot2 += dot1 + 1
	if bytes.IndexByte(tok[dot2+1:], '.') >= 0 {
		return nil, jwtMalformed // a JWE, or garbage
	}
	signed := tok[:dot2]
	// One buffer holds the three decoded parts.
	buf := make([]byte, jwtB64.DecodedLen(dot1)+jwtB64.DecodedLen(dot2-dot1-1)+jwtB64.DecodedLen(len(tok)-dot2-1))
	headerB, buf, ok := jwtDecode(buf, tok[:dot1])
	if !ok {
		return nil, jwtMalformed
	}
	payloadB, buf, ok := jwtDecode(buf, tok[dot1+1:dot2])
	if !ok {
		return nil, jwtMalformed
	}
	// An empty signature is well-formed ("alg":"none" tokens have one);
	// no accepted algorithm verifies it.
	var sig []byte
	if dot2+1 < len(tok) {
		if sig, _, ok = jwtDecode(buf, tok[dot2+1:]); !ok {
			return nil, jwtMalformed
		}
	}

	header, ok := jwtObject(headerB)
	if !ok {
		return nil, jwtMalformed
	}
	alg, present, ok := jwtString(header, "alg")
	if !ok || !present {
		return nil, jwtMalformed
	}
	kid, hasKid, ok := jwtString(header, "kid")
	if !ok {
		return nil, jwtMalformed
	}
	if _, crit := header["crit"]; crit {
		// RFC 7515 §4.1.11: extensions the recipient does not understand
		// must make it refuse the token; this verifier understands none.
		return nil, jwtMalformed
	}
	if alg != AlgHS256 && alg != AlgRS256 && alg != AlgES256 {
		return nil, jwtAlgorithm // "none" and everything else
	}

	if r := j.verifySignature(signed, sig, alg, kid, hasKid); r != jwtOK {
		return nil, r
	}

	claims, ok := jwtObject(payloadB)
	if !ok {
		return nil, jwtMalformed
	}
	sub, _, ok := jwtString(claims, "sub")
	if !ok {
		return nil, jwtMalformed
	}
	jti, _, ok := jwtString(claims, "jti")
	if !ok {
		return nil, jwtMalformed
	}
	exp, hasExp, ok := jwtNumericDate(claims, "exp")
	if !ok {
		return nil, jwtMalformed
	}
	nbf, hasNbf, ok := jwtNumericDate(claims, "nbf")
	if !ok {
		return nil, jwtMalformed
	}
	if _, _, ok := jwtNumericDate(claims, "iat"); !ok {
		return nil, jwtMalformed
	}
	iss, _, ok := jwtString(claims, "iss")
	if !ok {
		return nil, jwtMalformed
	}
	audOK, ok := jwtAudienceHas(claims, j.audience)
	if !ok {
		return nil, jwtMalformed
	}
	if sub == "" {
		return nil, jwtNoSubject
	}
	if j.issuer != "" && iss != j.issuer {
		return nil, jwtIssuer
	}
	if j.audience != "" && !audOK {
		return nil, jwtAudience
	}
	if !hasExp {
		exp = math.MaxInt64
	}
	if !hasNbf {
		nbf = math.MinInt64
	}
	e := newJWTEntry(tok, sub, jti, exp, nbf)
	e.hasExp = hasExp
	return e, jwtOK
}

// verifySignature picks the candidate keys (see NewJWT) and checks sig over
// signed with each until one verifies.
func (j *JWT) verifySignature(signed, sig []byte, alg, kid string, hasKid bool) jwtResult {
	var digest [sha256.Size]byte
	if alg != AlgHS256 {
		digest = sha256.Sum256(signed)
	}
	candidates := 0
	check := func(k *jwtKey) bool {
		if k.alg != alg {
			return false
		}
		candidates++
		return k.verify(signed, sig, &digest)
	}
	switch {
	case hasKid:
		named := false
		for i := range j.keys {
			if k := &j.keys[i]; k.kid == kid {
				named = true
				if check(k) {
					return jwtOK
				}
			}
		}
		if !named {
			anonymous := false
			for i := range j.keys {
				if k := &j.keys[i]; k.kid == "" {
					anonymous = true
					if check(k) {
						return jwtOK
					}
				}
			}
			if !anonymous {
				return jwtUnknownKey
			}
		}
	case len(j.keys) == 1:
		if check(&j.keys[0]) {
			return jwtOK
		}
	default:
		for i := range j.keys {
			if check(&j.keys[i]) {
				return jwtOK
			}
		}
	}
	if candidates == 0 {
		return jwtAlgorithm
	}
	return jwtSignature
}

func (k *jwtKey) verify(signed, sig []byte, digest *[sha256.Size]byte) bool {
	switch k.alg {
	case AlgHS256:
		m := hmac.New(sha256.New, k.secret)
		m.Write(signed)
		var sum [sha256.Size]byte
		return hmac.Equal(m.Sum(sum[:0]), sig)
	case AlgRS256:
		return rsa.VerifyPKCS1v15(k.rsa, crypto.SHA256, digest[:], sig) == nil
	case AlgES256:
		// JWS carries the raw r||s pair, 32 bytes each (RFC 7518 §3.4),
		// not ASN.1.
		if len(sig) != 64 {
			return false
		}
		r := new(big.Int).SetBytes(sig[:32])
		s := new(big.Int).SetBytes(sig[32:])
		return ecdsa.Verify(k.ec, digest[:], r, s)
	}
	return false
}

// jwtObject decodes a JSON object into its members, by exact name (unlike
// decoding into a struct, which would also take "SUB" for "sub"). A
// repeated name keeps its last value (RFC 7519 §4).
func jwtObject(b []byte) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return nil, false
	}
	return m, true
}

// jwtString reads a string member; ok is false when it is there but not a
// string.
func jwtString(m map[string]json.RawMessage, name string) (s string, present, ok bool) {
	raw, present := m[name]
	if !present {
		return "", false, true
	}
	if len(raw) == 0 || raw[0] != '"' {
		return "", true, false
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", true, false
	}
	return s, true, true
}

// jwtNumericDate reads a NumericDate (seconds since the epoch, possibly
// fractional) as unix ns, saturated to the int64 range.
func jwtNumericDate(m map[string]json.RawMessage, name string) (ns int64, present, ok bool) {
	raw, present := m[name]
	if !present {
		return 0, false, true
	}
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, true, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return 0, true, false
	}
	const limit = math.MaxInt64 / 1e9 // seconds representable in ns
	switch {
	case f >= limit:
		return math.MaxInt64, true, true
	case f <= -limit:
		return math.MinInt64, true, true
	}
	sec := math.Floor(f)
	return int64(sec)*1e9 + int64((f-sec)*1e9), true, true
}

// jwtAudienceHas reports whether "aud" (a string or an array of strings)
// names want; ok is false when "aud" has another shape.
func jwtAudienceHas(m map[string]json.RawMessage, want string) (has, ok bool) {
	raw, present := m["aud"]
	if !present {
		return false, true
	}
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return false, false
		}
		return s == want, true
	}
	if len(raw) == 0 || raw[0] != '[' {
		return false, false
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return false, false
	}
	for _, r := range list {
		var s string
		if len(r) == 0 || r[0] != '"' || json.Unmarshal(r, &s) != nil {
			return false, false
		}
		if s == want {
			has = true
		}
	}
	return has, true
}

// jwtEntry is one verified token. It is immutable once cached (but for
// the reference bit), so readers use it after releasing the shard lock.
type jwtEntry struct {
	token    []byte // the full token, compared on every hit: no collisions
	sub      string
	jti      string
	consumer string // JWTConsumerPrefix + sub, for Ctx.Consumer
	// The revocation members (see Revocations): "sub:" + sub, and "jti:" +
	// jti or nothing when the token has no id.
	subMember []byte
	jtiMember []byte
	exp       int64 // unix ns; MaxInt64 when the token has no "exp"
	nbf       int64 // unix ns; MinInt64 when the token has no "nbf"
	hasExp    bool
	hash      uint64
	ref       atomic.Uint32 // CLOCK reference bit
}

// newJWTEntry builds an entry whose byte fields share one buffer.
func newJWTEntry(tok []byte, sub, jti string, exp, nbf int64) *jwtEntry {
	n := len(tok) + len(RevokedSubPrefix) + len(sub)
	if jti != "" {
		n += len(RevokedJTIPrefix) + len(jti)
	}
	buf := make([]byte, 0, n)
	cut := func(start int) []byte { return buf[start:len(buf):len(buf)] }
	buf = append(buf, tok...)
	e := &jwtEntry{token: cut(0), sub: sub, jti: jti, consumer: JWTConsumerPrefix + sub, exp: exp, nbf: nbf}
	start := len(buf)
	buf = append(append(buf, RevokedSubPrefix...), sub...)
	e.subMember = cut(start)
	if jti != "" {
		start = len(buf)
		buf = append(append(buf, RevokedJTIPrefix...), jti...)
		e.jtiMember = cut(start)
	}
	return e
}

// jwtCache is the bounded verified-token cache: shards chosen by the
// token's xxhash64, each a map from that hash to a slot in a fixed-size
// ring swept CLOCK-style when full. A hit takes one shard's read lock and
// allocates nothing.
type jwtCache struct {
	shards   []jwtShard
	shift    uint // hash >> shift picks the shard
	perShard int
}

type jwtShard struct {
	mu    sync.RWMutex
	index map[uint64]int32 // hash → slot
	slots []*jwtEntry
	hand  int
	_     [64]byte // keep neighbouring shards' locks off one cache line
}

func newJWTCache(size int) *jwtCache {
	n := 64
	for n > 1 && size/n < 16 {
		n /= 2
	}
	shift := uint(64)
	for m := n; m > 1; m >>= 1 {
		shift--
	}
	c := &jwtCache{shards: make([]jwtShard, n), shift: shift, perShard: size / n}
	for i := range c.shards {
		c.shards[i].index = make(map[uint64]int32)
	}
	return c
}

func (c *jwtCache) shard(h uint64) *jwtShard {
	if c.shift == 64 {
		return &c.shards[0]
	}
	return &c.shards[h>>c.shift]
}

func (c *jwtCache) get(h uint64, tok []byte) *jwtEntry {
	s := c.shard(h)
	s.mu.RLock()
	var e *jwtEntry
	if i, ok := s.index[h]; ok {
		e = s.slots[i]
	}
	s.mu.RUnlock()
	if e == nil || !bytes.Equal(e.token, tok) {
		return nil
	}
	if e.ref.Load() == 0 {
		e.ref.Store(1)
	}
	return e
}

// put caches e, replacing an entry of the same hash (a collision, or
// another goroutine's verification of the same token). A full shard frees
// the first slot under its hand whose token has expired or was not used
// since the hand last passed.
func (c *jwtCache) put(e *jwtEntry, now int64) {
	s := c.shard(e.hash)
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.index[e.hash]; ok {
		s.slots[i] = e
		return
	}
	if len(s.slots) < c.perShard {
		s.index[e.hash] = int32(len(s.slots))
		s.slots = append(s.slots, e)
		return
	}
	for {
		old := s.slots[s.hand]
		if old.exp <= now || old.ref.Load() == 0 {
			delete(s.index, old.hash)
			s.slots[s.hand] = e
			s.index[e.hash] = int32(s.hand)
			s.hand = (s.hand + 1) % len(s.slots)
			return
		}
		old.ref.Store(0)
		s.hand = (s.hand + 1) % len(s.slots)
	}
}

// count reports the number of cached tokens.
func (c *jwtCache) count() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		n += len(s.slots)
		s.mu.RUnlock()
	}
	return n
}
