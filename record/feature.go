package record

import "github.com/tollgate/tollgate/pipeline"

// WriterKey holds the snapshot's *Writer in the build environment: the
// top-level recording section makes it, the routes' record rules use it.
var WriterKey = pipeline.NewKey[*Writer]("record.writer")

func init() {
	pipeline.Register(pipeline.Feature{
		Key: "recording", Stage: pipeline.StageRecord, Scope: pipeline.ScopeGlobal,
		Config: func() any { return new(Settings) },
		Build: func(b *pipeline.Build, cfg any) (pipeline.Filter, error) {
			s := cfg.(*Settings).withDefaults()
			if err := s.Validate(); err != nil {
				return nil, err
			}
			// One writer per directory and settings, kept across reloads
			// that leave them unchanged; a replaced one drains its queue
			// when the old snapshot's requests are done.
			w := b.State.Get("recording|"+s.digest(), func() (any, func()) {
				w := newWriter(s, b.Logger, b.Now)
				return w, w.Close
			}).(*Writer)
			WriterKey.Set(b.Env, w)
			return nil, nil // it screens nothing: the routes' rules record
		},
	})
	pipeline.Register(pipeline.Feature{
		Key: "record", Stage: pipeline.StageRecord, Scope: pipeline.ScopeRoute,
		Config: func() any { return new(Rule) },
		Build: func(b *pipeline.Build, cfg any) (pipeline.Filter, error) {
			return newRecorder(b, cfg.(*Rule))
		},
	})
}
