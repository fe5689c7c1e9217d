package limiter

import "github.com/tollgate/tollgate/pipeline"

func init() {
	pipeline.Register(pipeline.Feature{
		Key: "limits", Stage: pipeline.StageLimit, Scope: pipeline.ScopeRoute | pipeline.ScopeGlobal,
		Config: func() any { return new([]Config) },
		Build: func(b *pipeline.Build, cfg any) (pipeline.Filter, error) {
			f, err := Build(b, *cfg.(*[]Config))
			if f == nil || err != nil {
				return nil, err
			}
			return f, nil
		},
	})
}
