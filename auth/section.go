package auth

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/tollgate/tollgate/auth/jwt"
	"github.com/tollgate/tollgate/cluster"
	"github.com/tollgate/tollgate/pipeline"
)

// SignatureSettings is the top-level `signature` section: how signed
// requests are checked.
type SignatureSettings struct {
	Window pipeline.Duration `yaml:"window"` // default 300s; nonces are kept 2 × window
	// NonceRate is the nonces per second the replay filter is sized for
	// (default 10000) and NonceFalsePositive its false positive rate
	// (default 0.0001).
	NonceRate          int     `yaml:"nonce_rate"`
	NonceFalsePositive float64 `yaml:"nonce_false_positive"`
}

// ConsumerSettings is one entry of the top-level `consumers` section: a
// calling application.
type ConsumerSettings struct {
	AppKey     string   `yaml:"app_key"`
	Secret     string   `yaml:"secret" secret:"true"` // literal, or ${NAME}: each node's environment
	SecretFile string   `yaml:"secret_file"`          // or read from a file (trailing newline dropped)
	Tier       string   `yaml:"tier"`                 // a tiers name; default free
	QPS        int      `yaml:"qps"`                  // custom quota instead of a tier
	Enabled    *bool    `yaml:"enabled"`              // default true
	Routes     []string `yaml:"routes"`               // allow-list of route names; default all
	// Sign is the signing scheme the consumer's requests use: v1 (default)
	// or v2, which also signs the method, path and body (see package sign);
	// a v2 consumer's v1 signatures are refused.
	Sign string `yaml:"sign"`
}

// signed is what the signature section shares with the consumers
// section: the window and the replay filter.
type signed struct {
	window time.Duration
	nonces *NonceStore
}

var signedKey = pipeline.NewKey[signed]("auth.signature")

func init() {
	pipeline.RegisterSection(pipeline.Section{
		Key:       "signature",
		Config:    func() any { return new(SignatureSettings) },
		Provision: provisionSignature,
	})
	pipeline.RegisterSection(pipeline.Section{
		Key:       "consumers",
		After:     []string{"signature", "jwt"},
		Config:    func() any { return new([]*ConsumerSettings) },
		Provision: provisionConsumers,
	})
}

func provisionSignature(env *pipeline.Env, cfg any) error {
	s := cfg.(*SignatureSettings)
	if s.Window == 0 {
		s.Window = pipeline.Duration(300 * time.Second)
	}
	if s.NonceRate == 0 {
		s.NonceRate = 10000
	}
	if s.NonceFalsePositive == 0 {
		s.NonceFalsePositive = 1e-4
	}
	cl, _ := cluster.EnvKey.Get(env)
	signedKey.Set(env, signed{window: s.Window.D(), nonces: nonceStore(env.State, *s, cl)})
	return nil
}

// nonceSettings are what a replay filter is built from.
type nonceSettings struct {
	Signature SignatureSettings
	Clustered bool
}

// nonceKey is the state key of a replay filter: a digest of every field
// of its settings.
func nonceKey(s nonceSettings) string { return "auth.nonces|" + pipeline.Digest(s) }

// nonceStore returns the long-lived replay filter for these settings from
// the reload-surviving state, so a reload never forgets the nonces
// already seen; one that changed them gets a fresh filter, and the old
// one is released once no live snapshot uses it.
func nonceStore(st *pipeline.StateBuild, s SignatureSettings, cl *cluster.Client) *NonceStore {
	return st.Get(nonceKey(nonceSettings{Signature: s, Clustered: cl != nil}), func() (any, func()) {
		o := NonceOptions{TTL: 2 * s.Window.D(), ExpectedRate: s.NonceRate, FalsePositive: s.NonceFalsePositive}
		if cl != nil {
			o.Cluster = cl
		}
		return NewNonceStore(o), nil
	}).(*NonceStore)
}

func provisionConsumers(env *pipeline.Env, cfg any) error {
	list := *cfg.(*[]*ConsumerSettings)
	cs := make([]*Consumer, 0, len(list))
	quotas := make(map[string]pipeline.Quota, len(list))
	for i, cc := range list {
		if cc == nil {
			return fmt.Errorf("consumers[%d] is empty", i)
		}
		if cc.Enabled == nil {
			on := true
			cc.Enabled = &on
		}
		c, err := cc.consumer(env)
		if err != nil {
			return err
		}
		cs = append(cs, c)
		quotas[c.AppKey] = pipeline.Quota{Tier: c.Tier, QPS: cc.QPS}
	}
	consumers, err := NewConsumers(cs)
	if err != nil {
		return err
	}
	pipeline.ConsumerQuotasKey.Set(env, quotas)
	sig, _ := signedKey.Get(env)
	id := &Identity{Consumers: consumers, Nonces: sig.nonces, Now: env.Now, Window: sig.window}
	if j, ok := jwt.SectionKey.Get(env); ok {
		id.JWT = j.Filter
	}
	IdentityKey.Set(env, id)
	return nil
}

// consumer builds the consumer cc describes, reading its secret from a
// file where asked.
func (cc *ConsumerSettings) consumer(env *pipeline.Env) (*Consumer, error) {
	secret, err := cc.secret(env)
	if err != nil {
		return nil, err
	}
	c := &Consumer{AppKey: cc.AppKey, Secret: []byte(secret), Enabled: *cc.Enabled}
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
	return c, nil
}

// secret is the consumer's secret as written, or read from its
// secret_file. Checked for other hosts (Env.ForOtherHosts), a file this
// host does not have is taken as present: each node reads its own.
func (cc *ConsumerSettings) secret(env *pipeline.Env) (string, error) {
	switch {
	case cc.SecretFile != "" && cc.Secret != "":
		return "", fmt.Errorf("consumer %q: give secret or secret_file, not both", cc.AppKey)
	case cc.SecretFile == "":
		return cc.Secret, nil
	}
	if _, err := os.Stat(cc.SecretFile); err != nil && env.ForOtherHosts {
		if env.Note != nil {
			env.Note("consumer " + cc.AppKey + ": secret_file " + cc.SecretFile + " is not on this host; each node reads its own")
		}
		return strings.Repeat("x", 32), nil
	}
	b, err := os.ReadFile(cc.SecretFile)
	if err != nil {
		return "", fmt.Errorf("consumer %q: reading secret_file: %w", cc.AppKey, err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// NonceStats reports the replays the snapshot's replay filter refused and
// the nonce claims it decided without Redis (degraded); zero without one.
func NonceStats(env *pipeline.Env) (replays, degraded uint64) {
	if sig, ok := signedKey.Get(env); ok && sig.nonces != nil {
		return sig.nonces.Stats()
	}
	return 0, 0
}
