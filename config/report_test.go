package config

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tollgate/tollgate/pipeline"
)

// shown is a throwaway feature's filter (and shared object) that shows
// operators a name: the admin API finds it through the snapshot without
// knowing its type.
type shown struct{ name string }

func (s *shown) Handle(*pipeline.Ctx) pipeline.Verdict { return pipeline.Continue }

func (s *shown) Inspect(show func(kind string, state any)) { show("test_shown", s.name) }

var shownShared = pipeline.NewKey[*shown]("config.test_shown")

func init() {
	pipeline.Register(pipeline.Feature{
		Key: "test_shown", Stage: pipeline.StageMark, Scope: pipeline.ScopeRoute | pipeline.ScopeGlobal,
		Config: func() any { return new(string) },
		Build: func(b *pipeline.Build, cfg any) (pipeline.Filter, error) {
			if b.Route.Name == "" {
				shownShared.Set(b.Env, &shown{name: "shared " + *cfg.(*string)})
			}
			return &shown{name: *cfg.(*string)}, nil
		},
	})
}

func TestInspectorsVisitEveryPart(t *testing.T) {
	s, err := compile(t, `
test_shown: top
services:
  up: {instances: [{addr: "127.0.0.1:1"}]}
routes:
  - {name: a, match: {prefix: /a}, service: up, test_shown: one}
  - {name: b, match: {prefix: /b}, service: up}
  - {name: c, match: {prefix: /c}, service: up, test_shown: two}
`, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	s.Inspectors(func(route string, in pipeline.Inspector) {
		in.Inspect(func(kind string, state any) { got = append(got, fmt.Sprintf("%s/%s/%v", route, kind, state)) })
	})
	want := []string{"/test_shown/top", "/test_shown/shared top", "a/test_shown/one", "c/test_shown/two"}
	if !slices.Equal(got, want) {
		t.Fatalf("visited %q, want %q", got, want)
	}
}
