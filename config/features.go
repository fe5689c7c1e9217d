package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/pipeline"
	"gopkg.in/yaml.v3"
)

// staged is one filter of a chain with the stage that places it.
type staged struct {
	stage pipeline.Stage
	key   string
	f     pipeline.Filter
}

// buildFeatures decodes each registered feature's setting in settings and
// calls its factory. The config package knows no feature: an unregistered
// key was already refused by Parse.
func buildFeatures(b *pipeline.Build, settings map[string]yaml.Node, scope pipeline.Scope) ([]staged, error) {
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []staged
	for _, key := range keys {
		node := settings[key]
		if _, section := pipeline.LookupSection(key); section && scope == pipeline.ScopeGlobal {
			continue // provisioned by provisionSections
		}
		f, ok := pipeline.Lookup(key)
		if !ok || f.Scope&scope == 0 {
			return nil, &Error{Line: node.Line, Col: node.Column, Msg: fmt.Sprintf("unknown setting %q", key)}
		}
		cfg := f.Config()
		if err := node.Decode(cfg); err != nil {
			return nil, decodeError(key, &node, err)
		}
		filter, err := f.Build(b, cfg)
		if err != nil {
			return nil, &Error{Line: node.Line, Col: node.Column, Msg: err.Error()}
		}
		if filter != nil {
			out = append(out, staged{stage: f.Stage, key: key, f: filter})
		}
	}
	return buildAlways(b, settings, scope, out)
}

// buildAlways adds the filters of features built for every route
// (pipeline.Feature.Always) that the route does not set.
func buildAlways(b *pipeline.Build, settings map[string]yaml.Node, scope pipeline.Scope, out []staged) ([]staged, error) {
	if scope != pipeline.ScopeRoute {
		return out, nil
	}
	for _, f := range pipeline.Features() {
		if _, set := settings[f.Key]; set || !f.Always || f.Scope&scope == 0 {
			continue
		}
		filter, err := f.Build(b, f.Config())
		if err != nil {
			return nil, &Error{Msg: f.Key + ": " + err.Error()}
		}
		if filter != nil {
			out = append(out, staged{stage: f.Stage, key: f.Key, f: filter})
		}
	}
	return out, nil
}

// chainOrder sorts filters by stage, then key: the order every chain runs.
func chainOrder(fs []staged) []pipeline.Filter {
	slices.SortStableFunc(fs, func(a, b staged) int {
		if a.stage != b.stage {
			return int(a.stage - b.stage)
		}
		return strings.Compare(a.key, b.key)
	})
	out := make([]pipeline.Filter, len(fs))
	for i, s := range fs {
		out[i] = s.f
	}
	return out
}
