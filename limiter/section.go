package limiter

import (
	"fmt"

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
