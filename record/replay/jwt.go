package replay

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"
)

// JWTIssuer issues HS256 tokens for the JWT callers of a recording: their
// tokens were masked, so a replay gives each the subject it had (the
// record's consumer "jwt:<sub>"), with a fresh expiry and id.
type JWTIssuer struct {
	Secret   []byte
	KID      string
	Issuer   string
	Audience string
	// TTL is how long a token is valid; default 5m.
	TTL time.Duration
}

// Token returns a compact JWS for sub, issued at now.
func (j *JWTIssuer) Token(sub string, now time.Time) (string, error) {
	if len(j.Secret) == 0 {
		return "", errors.New("jwt: no secret")
	}
	ttl := j.TTL
	if ttl <= 0 {
		ttl = 5 * time.Minute
	}
	header := map[string]string{"alg": "HS256", "typ": "JWT"}
	if j.KID != "" {
		header["kid"] = j.KID
	}
	var id [12]byte
	_, _ = rand.Read(id[:])
	claims := map[string]any{"sub": sub, "iat": now.Unix(), "exp": now.Add(ttl).Unix(), "jti": hex.EncodeToString(id[:])}
	if j.Issuer != "" {
		claims["iss"] = j.Issuer
	}
	if j.Audience != "" {
		claims["aud"] = j.Audience
	}
	h, err := json.Marshal(header)
	if err != nil {
		return "", err
	}
	c, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString(h) + "." + enc.EncodeToString(c)
	mac := hmac.New(sha256.New, j.Secret)
	mac.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(mac.Sum(nil)), nil
}
