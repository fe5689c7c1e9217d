// Package auth proves who is calling: consumers (apps) and their tiers,
// signed requests with replay protection, and JWTs with revocation. Each
// scheme is a pipeline.Filter that, on success, sets Ctx.Consumer (and
// UserID) for the filters after it and for the upstream (X-Consumer): a
// signed consumer's app key, or jwt.ConsumerPrefix + a token's subject, so
// the two can never be taken for each other.
package auth

import (
	"fmt"
	"github.com/tollgate/tollgate/auth/jwt"
	"sort"
	"strings"
)

// Consumer is one calling application (tenant).
type Consumer struct {
	AppKey  string
	Secret  []byte
	Tier    string // "custom" for a quota of its own
	Enabled bool
	// Routes, when not nil, is the set of route names the consumer may call.
	Routes map[string]bool
	// SignV2 makes the consumer sign with scheme v2 (method, path,
	// parameters, body digest; see package sign). Its requests are then
	// checked only that way: a v1 signature from it is refused.
	SignV2 bool
}

// Consumers is an immutable app-key index, built once per config snapshot.
type Consumers struct {
	byKey map[string]*Consumer
}

// NewConsumers indexes cs; app keys must be unique and printable ASCII,
// and must not start with jwt.ConsumerPrefix (the namespace of JWT callers).
func NewConsumers(cs []*Consumer) (*Consumers, error) {
	out := &Consumers{byKey: make(map[string]*Consumer, len(cs))}
	for _, c := range cs {
		if !printable(c.AppKey, 128) {
			return nil, fmt.Errorf("consumer app_key %q must be 1..128 printable ASCII characters", c.AppKey)
		}
		if strings.HasPrefix(c.AppKey, jwt.ConsumerPrefix) {
			return nil, fmt.Errorf("consumer app_key %q: the prefix %q is reserved for JWT callers", c.AppKey, jwt.ConsumerPrefix)
		}
		if out.byKey[c.AppKey] != nil {
			return nil, fmt.Errorf("consumer %q is defined twice", c.AppKey)
		}
		if len(c.Secret) < 16 {
			return nil, fmt.Errorf("consumer %q: secret must be at least 16 bytes", c.AppKey)
		}
		out.byKey[c.AppKey] = c
	}
	return out, nil
}

// Lookup finds a consumer by app key without allocating; nil if unknown.
func (cs *Consumers) Lookup(appKey []byte) *Consumer {
	if cs == nil {
		return nil
	}
	return cs.byKey[string(appKey)]
}

// Keys lists app keys in order, for admin views.
func (cs *Consumers) Keys() []string {
	keys := make([]string, 0, len(cs.byKey))
	for k := range cs.byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Len reports the number of consumers.
func (cs *Consumers) Len() int {
	if cs == nil {
		return 0
	}
	return len(cs.byKey)
}

func printable(s string, maxLen int) bool {
	if len(s) == 0 || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

func printableBytes(b []byte, maxLen int) bool {
	if len(b) == 0 || len(b) > maxLen {
		return false
	}
	for _, c := range b {
		if c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}
