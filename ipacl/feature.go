package ipacl

import "github.com/tollgate/tollgate/pipeline"

// Config is the ip_acl setting, top-level (every request, before routing)
// or on a route.
type Config struct {
	Allow []string `yaml:"allow"`
	Deny  []string `yaml:"deny"`
}

func init() {
	pipeline.Register(pipeline.Feature{
		Key: "ip_acl", Stage: pipeline.StageScreen, Scope: pipeline.ScopeRoute | pipeline.ScopeGlobal,
		Config: func() any { return new(Config) },
		Build: func(_ *pipeline.Build, cfg any) (pipeline.Filter, error) {
			c := cfg.(*Config)
			acl, err := New(c.Allow, c.Deny)
			if acl == nil || err != nil {
				return nil, err
			}
			return acl, nil
		},
	})
}
