package config

import (
	"fmt"
	"os"
	"strings"

	"github.com/tollgate/tollgate/auth"
	"github.com/tollgate/tollgate/auth/jwt"
	"github.com/tollgate/tollgate/cluster"
	"github.com/tollgate/tollgate/pipeline"
)

// shareIdentity builds the consumers, the replay filter and the JWT
// filter, and shares them for the auth feature (auth.IdentityKey).
func (c *Compiler) shareIdentity(s *Snapshot, f *File, cl *cluster.Client) (err error) {
	if s.Consumers, err = compileConsumers(f); err != nil {
		return err
	}
	s.nonces = nonceStore(s.state, f, cl)
	s.clock = c.Clock
	if f.JWT != nil {
		if s.jwt, err = c.compileJWT(s.state, f.JWT, cl); err != nil {
			return err
		}
	}
	auth.IdentityKey.Set(s.env, &auth.Identity{Consumers: s.Consumers, Nonces: s.nonces, Clock: s.clock,
		Window: f.Signature.Window.D(), JWT: s.jwt})
	return nil
}

// compileConsumers builds the app-key index, reading secrets from files
// where asked.
func compileConsumers(f *File) (*auth.Consumers, error) {
	cs := make([]*auth.Consumer, 0, len(f.Consumers))
	for i, cc := range f.Consumers {
		if cc == nil {
			return nil, fmt.Errorf("consumers[%d] is empty", i)
		}
		secret := cc.Secret
		switch {
		case cc.SecretFile != "" && secret != "":
			return nil, fmt.Errorf("consumer %q: give secret or secret_file, not both", cc.AppKey)
		case cc.SecretFile != "":
			b, err := os.ReadFile(cc.SecretFile)
			if err != nil {
				return nil, fmt.Errorf("consumer %q: reading secret_file: %w", cc.AppKey, err)
			}
			secret = strings.TrimRight(string(b), "\r\n")
		}
		c := &auth.Consumer{AppKey: cc.AppKey, Secret: []byte(secret), Enabled: *cc.Enabled}
		switch {
		case cc.QPS > 0 && cc.Tier != "":
			return nil, fmt.Errorf("consumer %q: give tier or qps, not both", cc.AppKey)
		case cc.QPS > 0:
			c.Tier = "custom"
		default:
			c.Tier = cc.Tier // its quota: the limiter's tiers section
			if c.Tier == "" {
				c.Tier = "free"
			}
		}
		switch cc.Sign {
		case "", "v1":
		case "v2":
			c.SignV2 = true
		default:
			return nil, fmt.Errorf("consumer %q: sign %q: want v1 or v2", cc.AppKey, cc.Sign)
		}
		if cc.Routes != nil {
			c.Routes = map[string]bool{}
			for _, r := range cc.Routes {
				c.Routes[r] = true
			}
		}
		cs = append(cs, c)
	}
	return auth.NewConsumers(cs)
}

// clusterClient returns the node's Redis client, created on first use. The
// address is read once: changing it needs a restart (a reload says so).
func (c *Compiler) clusterClient(f *File) (*cluster.Client, error) {
	if f.Cluster.Redis == "" || c.Offline {
		return nil, nil
	}
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	if c.cluster != nil {
		return c.cluster, nil
	}
	tlsCfg, err := f.Cluster.TLS.Config()
	if err != nil {
		return nil, fmt.Errorf("cluster.tls: %w", err)
	}
	cl, err := cluster.New(cluster.Options{
		Addrs:    splitList(f.Cluster.Redis),
		Password: f.Cluster.Password,
		TLS:      tlsCfg,
		NodeID:   f.NodeID,
		Budget:   f.Cluster.Budget.D(),
		Logger:   c.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("cluster.redis: %w", err)
	}
	c.cluster = cl
	return cl, nil
}

// nonceSettings are what a replay filter is built from.
type nonceSettings struct {
	Signature Signature
	Clustered bool
}

// nonceKey is the state key of a replay filter: a digest of every field
// of its settings.
func nonceKey(s nonceSettings) string { return "auth.nonces|" + pipeline.Digest(s) }

// nonceStore returns the long-lived replay filter for these settings from
// the reload-surviving state, so a reload never forgets the nonces
// already seen; one that changed them gets a fresh filter, and the old
// one is released once no live snapshot uses it.
func nonceStore(st *pipeline.StateBuild, f *File, cl *cluster.Client) *auth.NonceStore {
	return st.Get(nonceKey(nonceSettings{Signature: f.Signature, Clustered: cl != nil}), func() (any, func()) {
		o := auth.NonceOptions{TTL: 2 * f.Signature.Window.D(), ExpectedRate: f.Signature.NonceRate,
			FalsePositive: f.Signature.NonceFalsePositive}
		if cl != nil {
			o.Cluster = cl
		}
		return auth.NewNonceStore(o), nil
	}).(*auth.NonceStore)
}

// compileJWT builds the JWT filter shared by the snapshot's jwt routes.
func (c *Compiler) compileJWT(st *pipeline.StateBuild, j *JWT, cl *cluster.Client) (*jwt.Filter, error) {
	var keys []jwt.Key
	for _, k := range j.Keys {
		key := jwt.Key{KID: k.KID, Alg: k.Alg}
		switch {
		case (k.Secret == "") == (k.PublicKeyFile == ""):
			return nil, fmt.Errorf("jwt key %q: give exactly one of secret or public_key_file", k.KID)
		case k.Secret != "":
			key.Secret = []byte(k.Secret)
		default:
			pub, err := jwt.LoadPEMKey(k.PublicKeyFile)
			if err != nil {
				return nil, fmt.Errorf("jwt key %q: %w", k.KID, err)
			}
			key.Public = pub
		}
		keys = append(keys, key)
	}
	if j.JWKSFile != "" {
		more, err := jwt.LoadJWKS(j.JWKSFile)
		if err != nil {
			return nil, fmt.Errorf("jwt.jwks_file: %w", err)
		}
		keys = append(keys, more...)
	}
	cfg := jwt.Config{Keys: keys, Issuer: j.Issuer, Audience: j.Audience, Leeway: j.Leeway.D(), Now: c.Clock.Now,
		ExpOptional: j.RequireExp != nil && !*j.RequireExp}
	if cl != nil {
		cfg.Revoked = revocations(st, cl, j.RevocationKey)
	}
	return jwt.New(cfg)
}

// revocations returns the long-lived view of a revocation set. Its
// refresh loop is the cluster client's (one per key, stopped with the
// client), so the state has nothing to release.
func revocations(st *pipeline.StateBuild, cl *cluster.Client, key string) *revocationView {
	return st.Get("jwt.revocations|"+key, func() (any, func()) {
		return &revocationView{set: cl.WatchSet(key, 0)}, nil
	}).(*revocationView)
}

// revocationView answers jwt.Revocations from a Redis set watched through
// client-side caching: members are "jti:<id>" and "sub:<subject>", which
// the JWT filter hands over whole (built once per cached token), so ids
// of any length are checked and the lookups do not allocate.
type revocationView struct {
	set *cluster.SetView
}

// Revoked implements jwt.Revocations.
func (v *revocationView) Revoked(jti, sub []byte) bool {
	return (len(jti) > 0 && v.set.Has(jti)) || (len(sub) > 0 && v.set.Has(sub))
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
