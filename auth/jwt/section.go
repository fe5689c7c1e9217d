package jwt

import (
	"fmt"
	"time"

	"github.com/tollgate/tollgate/cluster"
	"github.com/tollgate/tollgate/pipeline"
)

// Settings is the top-level `jwt` section: how bearer tokens are
// verified for the routes with `auth: jwt`.
type Settings struct {
	Issuer   string            `yaml:"issuer"`
	Audience string            `yaml:"audience"`
	Leeway   pipeline.Duration `yaml:"leeway"` // default 30s
	Keys     []KeySettings     `yaml:"keys"`
	JWKSFile string            `yaml:"jwks_file"` // keys from a JWKS document (reloaded with the config)
	// RequireExp refuses tokens without an "exp" claim, which would never
	// expire; default true.
	RequireExp *bool `yaml:"require_exp"`
	// RevocationKey is the Redis sorted set of revoked "jti:<id>" and
	// "sub:<subject>" members; default tollgate:revoked.
	RevocationKey string `yaml:"revocation_key"`
}

// KeySettings is one verification key of the jwt section.
type KeySettings struct {
	KID           string `yaml:"kid"`
	Alg           string `yaml:"alg"` // HS256 | RS256 | ES256
	Secret        string `yaml:"secret" secret:"true"`
	PublicKeyFile string `yaml:"public_key_file"`
}

// Section is what the jwt section shares: its settings as provisioned
// (defaults written in) and the filter the routes with `auth: jwt` use.
type Section struct {
	Settings *Settings
	Filter   *Filter
}

// SectionKey holds the snapshot's jwt Section; it is unset without one.
var SectionKey = pipeline.NewKey[Section]("jwt.section")

// defaultLeeway is the clock skew allowed when the section names none.
const defaultLeeway = 30 * time.Second

func init() {
	pipeline.RegisterSection(pipeline.Section{
		Key: "jwt",
		// A file without the section leaves the pointer nil: no JWT.
		Config:    func() any { return new(*Settings) },
		Provision: provision,
	})
}

func provision(env *pipeline.Env, cfg any) error {
	s := *cfg.(**Settings)
	if s == nil {
		return nil
	}
	if s.Leeway == 0 {
		s.Leeway = pipeline.Duration(defaultLeeway)
	}
	if s.RevocationKey == "" {
		s.RevocationKey = "tollgate:revoked"
	}
	keys, err := s.keys()
	if err != nil {
		return err
	}
	c := Config{Keys: keys, Issuer: s.Issuer, Audience: s.Audience, Leeway: s.Leeway.D(), Now: env.Now,
		ExpOptional: s.RequireExp != nil && !*s.RequireExp}
	if cl, ok := cluster.EnvKey.Get(env); ok && cl != nil {
		c.Revoked = revocations(env.State, cl, s.RevocationKey)
	}
	f, err := New(c)
	if err != nil {
		return err
	}
	SectionKey.Set(env, Section{Settings: s, Filter: f})
	return nil
}

// keys loads the section's keys: each written one, then the JWKS file's.
func (s *Settings) keys() ([]Key, error) {
	var keys []Key
	for _, k := range s.Keys {
		key := Key{KID: k.KID, Alg: k.Alg}
		switch {
		case (k.Secret == "") == (k.PublicKeyFile == ""):
			return nil, fmt.Errorf("jwt key %q: give exactly one of secret or public_key_file", k.KID)
		case k.Secret != "":
			key.Secret = []byte(k.Secret)
		default:
			pub, err := LoadPEMKey(k.PublicKeyFile)
			if err != nil {
				return nil, fmt.Errorf("jwt key %q: %w", k.KID, err)
			}
			key.Public = pub
		}
		keys = append(keys, key)
	}
	if s.JWKSFile != "" {
		more, err := LoadJWKS(s.JWKSFile)
		if err != nil {
			return nil, fmt.Errorf("jwt.jwks_file: %w", err)
		}
		keys = append(keys, more...)
	}
	return keys, nil
}

// revocations returns the long-lived view of a revocation set. Its
// refresh loop is the cluster client's (one per key, stopped with the
// client), so the state has nothing to release.
func revocations(st *pipeline.StateBuild, cl *cluster.Client, key string) *revocationView {
	return st.Get("jwt.revocations|"+key, func() (any, func()) {
		return &revocationView{set: cl.WatchSet(key, 0)}, nil
	}).(*revocationView)
}

// revocationView answers Revocations from a Redis set watched through
// client-side caching: members are "jti:<id>" and "sub:<subject>", which
// the filter hands over whole (built once per cached token), so ids of
// any length are checked and the lookups do not allocate.
type revocationView struct {
	set *cluster.SetView
}

// Revoked implements Revocations.
func (v *revocationView) Revoked(jti, sub []byte) bool {
	return (len(jti) > 0 && v.set.Has(jti)) || (len(sub) > 0 && v.set.Has(sub))
}
