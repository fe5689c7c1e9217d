package limiter

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"time"

	"github.com/tollgate/tollgate/pipeline"
)

// Config is one entry of a `limits` list (on a route, or at top level for
// every request before routing):
//
//	limits:
//	  - {by: consumer, scope: cluster}                 # the consumer's tier quota
//	  - {by: consumer, scope: cluster, share: 0.5}     # this API may use half of it
//	  - {by: ip, rate: 100, per: 1s, scope: local, reject_for: 10s}
//	  - {by: json.merchant_id, rate: 10000, per: 1s, scope: cluster, algorithm: sliding_window}
type Config struct {
	// Name names the rule in refusals, the access log and /admin/limits;
	// default "<route>.<by>" (".tier" for a tier quota, ".share" for a
	// share of one), with ".2", ".3" for repeats. It is part of the
	// state's key itself (where a tier quota's counters are not the
	// route's), not of its digest.
	Name string `yaml:"name" digest:"-"`
	// By is the counter's key: route (or REQUEST: the whole route), ip,
	// consumer, user, header.NAME or cookie.NAME (a session), query.NAME,
	// form.NAME, json.a.b, path, method. Default route.
	By string `yaml:"by"`
	// Rate admissions per Per (default 1s). Without a rate, a rule by
	// consumer is the consumer's tier quota (tiers, or its own qps).
	Rate float64  `yaml:"rate"`
	Per  Duration `yaml:"per"`
	// Burst is the token bucket's capacity; default 1.5 × rate.
	Burst float64 `yaml:"burst"`
	// Algorithm: token_bucket (default), sliding_window, fixed_window,
	// leaky_bucket.
	Algorithm string `yaml:"algorithm"`
	// Scope: local (default; each node enforces rate ÷ live nodes, 911)
	// or cluster (one figure for the whole cluster through token leases
	// from Redis, 919).
	Scope string `yaml:"scope"`
	// Share makes a tier quota's per-API part: this route may use this
	// fraction (0 < share <= 1) of the consumer's tier quota, and its
	// requests count against the tier quota as well.
	Share float64 `yaml:"share"`
	// RejectFor: once the limit trips for a key, the key is refused for
	// this long whatever its counter says.
	RejectFor Duration `yaml:"reject_for"`
	// Status overrides the refusal status (default: top-level status:
	// local_limit or cluster_limit). How a refusal is answered shapes
	// no counter: Status, OnReject and Headers are left out of the digest
	// (a tier quota's counters are shared by routes that answer
	// differently).
	Status int `yaml:"status" digest:"-"`
	// OnReject answers refusals with this instead (a challenge page, a
	// redirect to a captcha).
	OnReject *Answer `yaml:"on_reject" digest:"-"`
	// Headers adds X-RateLimit-Limit/Remaining/Reset to admitted answers
	// too (refusals always carry them).
	Headers bool `yaml:"headers" digest:"-"`
	// MaxDelay is how long a leaky bucket may hold a request to smooth
	// it out before refusing; default burst × interval when burst is set,
	// else min(per, 1s).
	MaxDelay Duration `yaml:"max_delay"`
	// MaxKeys bounds the keys the rule keeps counters for; default
	// 1,000,000 (local) or 100,000 (cluster).
	MaxKeys int `yaml:"max_keys"`
	// IPv6Prefix groups IPv6 clients of a rule by ip; default 64.
	IPv6Prefix int `yaml:"ipv6_prefix"`
}

// Answer is a configured refusal (on_reject).
type Answer struct {
	Status      int               `yaml:"status"` // default 429
	Body        string            `yaml:"body"`
	ContentType string            `yaml:"content_type"` // default application/json
	Headers     map[string]string `yaml:"headers"`
}

// Duration is a Go duration in configuration ("250ms", "10s", "1m").
type Duration = pipeline.Duration

// Scope says who enforces a rule.
type Scope uint8

const (
	Local   Scope = iota // each node: rate ÷ live nodes
	Cluster              // the whole cluster: token leases from Redis
)

func (s Scope) String() string {
	if s == Cluster {
		return "cluster"
	}
	return "local"
}

// Defaults.
const (
	DefaultMaxKeys        = 1_000_000
	DefaultClusterMaxKeys = 100_000
	// BurstFactor is the default token bucket capacity, × rate.
	BurstFactor = 1.5
	// MaxRules bounds the rules of one route.
	MaxRules = 8
)

// spec is a validated Config.
type spec struct {
	name      string
	dim       dimension
	alg       Algorithm
	scope     Scope
	tier      bool // rate from the consumer's quota
	share     float64
	base      Limit // the whole cluster's limit; for tier rules per 1 request/s
	rate      float64
	per       time.Duration
	burst     float64
	maxDelay  time.Duration
	rejectFor int64
	status    int
	answer    *Answer
	headers   bool
	maxKeys   int
	// settings is the Config with its defaults written in, as the
	// digest of the rule's counters reads it.
	settings Config
}

// validate checks one rule and fills its defaults.
func (cfg *Config) validate() (*spec, error) {
	s := &spec{status: cfg.Status, answer: cfg.OnReject, headers: cfg.Headers, rejectFor: int64(cfg.RejectFor)}
	var err error
	if s.dim, err = parseDimension(cfg.By, cfg.IPv6Prefix); err != nil {
		return nil, err
	}
	if cfg.IPv6Prefix != 0 && s.dim.kind != dimIP {
		return nil, fmt.Errorf("ipv6_prefix applies to rules by ip")
	}
	if s.alg, err = ParseAlgorithm(cfg.Algorithm); err != nil {
		return nil, err
	}
	switch cfg.Scope {
	case "", "local":
		s.scope = Local
	case "cluster":
		s.scope = Cluster
	default:
		return nil, fmt.Errorf("scope %q: want local or cluster", cfg.Scope)
	}
	s.per = cfg.Per.D()
	if s.per == 0 {
		s.per = time.Second
	}
	if s.per < time.Millisecond {
		return nil, fmt.Errorf("per %v: want at least 1ms", s.per)
	}
	switch {
	case cfg.Rate < 0 || math.IsNaN(cfg.Rate) || math.IsInf(cfg.Rate, 0):
		return nil, fmt.Errorf("rate %v: want a positive number", cfg.Rate)
	case cfg.Rate == 0 && !s.dim.isConsumer():
		return nil, fmt.Errorf("rate is required (only a rule by consumer may leave it out: the consumer's tier quota)")
	case cfg.Rate == 0:
		s.tier = true
		if cfg.Per != 0 && s.per != time.Second {
			return nil, fmt.Errorf("a tier quota is per second (tiers are requests per second): leave per out")
		}
		if cfg.Burst != 0 {
			return nil, fmt.Errorf("burst is a count of requests; a tier quota's burst is %g × the consumer's rate", BurstFactor)
		}
	case float64(s.per)/cfg.Rate < 1:
		return nil, fmt.Errorf("rate %g per %v is more than one per nanosecond", cfg.Rate, s.per)
	}
	s.rate = cfg.Rate
	if cfg.Share != 0 {
		if !s.tier {
			return nil, fmt.Errorf("share is a fraction of a tier quota: use it on a rule by consumer without rate")
		}
		if !(cfg.Share > 0 && cfg.Share <= 1) {
			return nil, fmt.Errorf("share %v: want 0 < share <= 1", cfg.Share)
		}
		s.share = cfg.Share
	}
	if cfg.Burst < 0 || (cfg.Burst > 0 && cfg.Burst < 1) {
		return nil, fmt.Errorf("burst %v: want at least 1", cfg.Burst)
	}
	if cfg.Burst > 0 && s.alg.windowed() {
		return nil, fmt.Errorf("burst applies to token_bucket and leaky_bucket; a window admits rate per window")
	}
	if cfg.MaxDelay != 0 && s.alg != LeakyBucket {
		return nil, fmt.Errorf("max_delay applies to leaky_bucket")
	}
	rate := s.rate
	if s.tier {
		rate = 1 // scaled per consumer
	}
	s.burst = cfg.Burst
	if s.burst == 0 {
		s.burst = BurstFactor * rate
	}
	s.maxDelay = cfg.MaxDelay.D()
	if s.alg == LeakyBucket && s.maxDelay == 0 {
		if cfg.Burst > 0 {
			s.maxDelay = time.Duration(cfg.Burst * float64(s.per) / rate)
		} else {
			s.maxDelay = min(s.per, time.Second)
		}
	}
	s.base = NewLimit(s.alg, rate, s.per, s.burst, s.maxDelay)
	if cfg.RejectFor < 0 {
		return nil, fmt.Errorf("reject_for must not be negative")
	}
	if s.status != 0 && (s.status < 100 || s.status > 999) {
		return nil, fmt.Errorf("status %d is not an HTTP status", s.status)
	}
	if a := s.answer; a != nil && a.Status != 0 && (a.Status < 100 || a.Status > 999) {
		return nil, fmt.Errorf("on_reject.status %d is not an HTTP status", a.Status)
	}
	s.maxKeys = cfg.MaxKeys
	switch {
	case s.maxKeys < 0:
		return nil, fmt.Errorf("max_keys must not be negative")
	case s.maxKeys == 0 && s.scope == Cluster:
		s.maxKeys = DefaultClusterMaxKeys
	case s.maxKeys == 0:
		s.maxKeys = DefaultMaxKeys
	}
	s.name = cfg.Name
	s.settings = cfg.withDefaults(s)
	return s, nil
}

// withDefaults returns cfg as s, its validated form, reads it: defaults
// written in and names in their canonical form, so that two ways of
// writing one rule share counters.
func (cfg Config) withDefaults(s *spec) Config {
	cfg.By, cfg.IPv6Prefix = s.dim.text, s.dim.v6bits
	cfg.Algorithm, cfg.Scope = s.alg.String(), s.scope.String()
	cfg.Rate, cfg.Per, cfg.Burst, cfg.MaxDelay = s.rate, Duration(s.per), s.burst, Duration(s.maxDelay)
	cfg.Share, cfg.MaxKeys = s.share, s.maxKeys
	return cfg
}

// digest identifies the settings that shape a rule's counters: an
// unchanged digest keeps the counters across a reload. It covers every
// field of Config but those marked to be left out.
func (s *spec) digest() string {
	return pipeline.Digest(s.settings)
}

// digestHex is the first n bytes of b's SHA-256, in hex.
func digestHex(b []byte, n int) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:n])
}
