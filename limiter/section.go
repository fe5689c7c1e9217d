package limiter

import (
	"fmt"
	"maps"
	"slices"

	"github.com/tollgate/tollgate/pipeline"
)

// Statuses is the top-level `status` section: the statuses rate-limit
// refusals answer with.
//
//	status: {local_limit: 911, cluster_limit: 919}
type Statuses struct {
	LocalLimit   int `yaml:"local_limit"`   // local limits; default 911
	ClusterLimit int `yaml:"cluster_limit"` // cluster limits and tenant quotas; default 919
}

// statusKey holds the snapshot's Statuses for its limit rules.
var statusKey = pipeline.NewKey[Statuses]("limiter.status")

func init() {
	pipeline.RegisterSection(pipeline.Section{
		Key:    "status",
		Config: func() any { return new(Statuses) },
		Provision: func(env *pipeline.Env, cfg any) error {
			s := cfg.(*Statuses)
			if s.LocalLimit == 0 {
				s.LocalLimit = 911
			}
			if s.ClusterLimit == 0 {
				s.ClusterLimit = 919
			}
			for _, st := range []struct {
				name string
				v    int
			}{{"status.local_limit", s.LocalLimit}, {"status.cluster_limit", s.ClusterLimit}} {
				if st.v < 100 || st.v > 999 {
					return fmt.Errorf("%s %d is not an HTTP status (100..999)", st.name, st.v)
				}
			}
			statusKey.Set(env, *s)
			return nil
		},
	})
}

// Tiers is the top-level `tiers` section: the requests per second of each
// tier of consumers, which rules by consumer without a rate enforce.
//
//	tiers: {free: 10, basic: 100, enterprise: 1000}
type Tiers map[string]int

// defaultTiers are there unless the section sets them otherwise.
var defaultTiers = Tiers{"free": 10, "basic": 100, "enterprise": 1000}

// Quotas are the consumers' quotas by consumer (as Ctx.Consumer names
// them), tiers resolved, and the tiers by name. Immutable once built.
type Quotas struct {
	Consumers map[string]pipeline.Quota
	Tiers     map[string]int
}

// quotasKey holds the snapshot's Quotas for its tier rules.
var quotasKey = pipeline.NewKey[*Quotas]("limiter.quotas")

func init() {
	pipeline.RegisterSection(pipeline.Section{
		Key: "tiers",
		// The consumers declare their quotas (pipeline.ConsumerQuotasKey).
		After:  []string{"consumers"},
		Config: func() any { return new(Tiers) },
		Provision: func(env *pipeline.Env, cfg any) error {
			t := cfg.(*Tiers)
			if *t == nil {
				*t = Tiers{}
			}
			for name, qps := range defaultTiers {
				if _, ok := (*t)[name]; !ok {
					(*t)[name] = qps
				}
			}
			for _, name := range slices.Sorted(maps.Keys(*t)) {
				if qps := (*t)[name]; qps < 0 {
					return fmt.Errorf("tiers.%s: %d requests per second must not be negative", name, qps)
				}
			}
			q := &Quotas{Consumers: map[string]pipeline.Quota{}, Tiers: maps.Clone(*t)}
			declared, _ := pipeline.ConsumerQuotasKey.Get(env)
			for _, consumer := range slices.Sorted(maps.Keys(declared)) {
				quota := declared[consumer]
				if quota.Tier != "custom" {
					qps, ok := q.Tiers[quota.Tier]
					if !ok {
						return fmt.Errorf("consumer %q: tier %q is not defined in tiers", consumer, quota.Tier)
					}
					quota.QPS = qps
				}
				q.Consumers[consumer] = quota
			}
			quotasKey.Set(env, q)
			return nil
		},
	})
}
