// Package mirror sends a copy of a share of a route's live requests to a
// second service (shadow traffic), off the request path, and compares its
// answers with the primary's. It sits at pipeline.StageRecord beside
// recording and shares only the comparison of answers with it
// (record.CompareBodies): its copies go to a service through their own
// bounded queue and workers, not to the recording writer.
package mirror

import "github.com/tollgate/tollgate/pipeline"

func init() {
	pipeline.Register(pipeline.Feature{
		Key: "mirror", Stage: pipeline.StageRecord, Scope: pipeline.ScopeRoute,
		Config: func() any { return new(Rule) },
		Build: func(b *pipeline.Build, cfg any) (pipeline.Filter, error) {
			return New(b, cfg.(*Rule))
		},
	})
}
