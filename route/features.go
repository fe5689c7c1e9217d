package route

import (
	"errors"

	"github.com/tollgate/tollgate/pipeline"
)

// DeprecationConfig is a route's `deprecated` setting: dates are
// YYYY-MM-DD, successor a path or URL.
type DeprecationConfig struct {
	Since     string `yaml:"since"`
	Sunset    string `yaml:"sunset"`
	Successor string `yaml:"successor"`
}

// RewriteConfig is a route's `rewrite` setting (see RewriteSpec).
type RewriteConfig struct {
	Path        string `yaml:"path"`
	StripPrefix string `yaml:"strip_prefix"`
	AddPrefix   string `yaml:"add_prefix"`
	Regex       string `yaml:"regex"`
	Replace     string `yaml:"replace"`
	Host        string `yaml:"host"`
}

func init() {
	pipeline.Register(pipeline.Feature{
		Key: "deprecated", Stage: pipeline.StageMark, Scope: pipeline.ScopeRoute,
		Config: func() any { return new(DeprecationConfig) },
		Build: func(_ *pipeline.Build, cfg any) (pipeline.Filter, error) {
			d := cfg.(*DeprecationConfig)
			return NewDeprecation(d.Since, d.Sunset, d.Successor)
		},
	})
	pipeline.Register(pipeline.Feature{
		Key: "rewrite", Stage: pipeline.StageRewrite, Scope: pipeline.ScopeRoute,
		Config: func() any { return new(RewriteConfig) },
		Build: func(b *pipeline.Build, cfg any) (pipeline.Filter, error) {
			if !b.Route.Forwards {
				return nil, errors.New("rewrite applies only to routes that forward (service or split)")
			}
			r := cfg.(*RewriteConfig)
			return NewRewrite(RewriteSpec{Path: r.Path, StripPrefix: r.StripPrefix, AddPrefix: r.AddPrefix,
				Regex: r.Regex, Replace: r.Replace, Host: r.Host})
		},
	})
}
