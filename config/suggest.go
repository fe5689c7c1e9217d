package config

import (
	"reflect"
	"sort"
	"strings"

	"github.com/tollgate/tollgate/pipeline"
)

// knownKeys lists the keys a mapping decoded into t may hold: its fields,
// and where t collects them, the registered features and sections (on
// the file and a route) or a section's plug-ins.
func knownKeys(t reflect.Type) []string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if tag != "" && tag != "-" {
			keys = append(keys, tag)
		}
	}
	if !hasInline(t) {
		return keys
	}
	if collectsFeatures(t) {
		for _, f := range pipeline.Features() {
			if f.Scope&scopeOf(t) != 0 {
				keys = append(keys, f.Key)
			}
		}
		if scopeOf(t) == pipeline.ScopeGlobal {
			for _, s := range pipeline.Sections() {
				keys = append(keys, s.Key)
			}
		}
		return keys
	}
	for _, s := range pipeline.Sections() {
		if s.Entries != nil && reflect.TypeOf(s.Config()).Elem() == t {
			for k := range s.Entries() {
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}
