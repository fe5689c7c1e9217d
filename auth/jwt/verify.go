package jwt

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"
)

func jwtSatAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
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
func (j *Filter) verify(tok []byte) (*jwtEntry, jwtResult) {
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
func (j *Filter) verifySignature(signed, sig []byte, alg, kid string, hasKid bool) jwtResult {
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
