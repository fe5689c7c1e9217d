package config

import (
	"github.com/tollgate/tollgate/pipeline"
	"gopkg.in/yaml.v3"
)

// checkOwnedValues decodes each registered section and feature setting
// the file writes into its owner's type, so that a value of the wrong
// kind there is reported with the file's other mistakes, in one pass,
// rather than alone once the file compiles. The owners decode again
// when they build (provisionSections, buildFeatures).
func (f *File) checkOwnedValues(errs *problems) {
	for key, node := range f.Features {
		checkOwned(errs, key, node, pipeline.ScopeGlobal)
	}
	for _, r := range f.Routes {
		if r == nil {
			continue
		}
		for key, node := range r.Features {
			checkOwned(errs, key, node, pipeline.ScopeRoute)
		}
	}
}

func checkOwned(errs *problems, key string, node yaml.Node, scope pipeline.Scope) {
	var cfg any
	if s, ok := pipeline.LookupSection(key); ok && scope == pipeline.ScopeGlobal {
		cfg = s.Config()
	} else if ft, ok := pipeline.Lookup(key); ok && ft.Scope&scope != 0 {
		cfg = ft.Config()
	} else {
		return // an unknown key, already reported
	}
	if err := node.Decode(cfg); err != nil {
		errs.addDecode(&node, err)
	}
}
