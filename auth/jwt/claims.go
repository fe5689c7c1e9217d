package jwt

import (
	"sync/atomic"
	"time"
)

// Claims is what a verified token says about its caller. Its strings point
// into the verified-token cache and are immutable.
type Claims struct {
	Subject   string    // "sub"
	ID        string    // "jti", "" when absent
	Expires   time.Time // "exp", zero when absent
	NotBefore time.Time // "nbf", zero when absent
}

// jwtEntry is one verified token. It is immutable once cached (but for
// the reference bit), so readers use it after releasing the shard lock.
type jwtEntry struct {
	token    []byte // the full token, compared on every hit: no collisions
	sub      string
	jti      string
	consumer string // ConsumerPrefix + sub, for Ctx.Consumer
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
	e := &jwtEntry{token: cut(0), sub: sub, jti: jti, consumer: ConsumerPrefix + sub, exp: exp, nbf: nbf}
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

// The cache's view of an entry (tokencache.Entry).
func (e *jwtEntry) Token() []byte       { return e.token }
func (e *jwtEntry) Hash() uint64        { return e.hash }
func (e *jwtEntry) Expires() int64      { return e.exp }
func (e *jwtEntry) Ref() *atomic.Uint32 { return &e.ref }
