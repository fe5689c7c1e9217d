package limiter

import "github.com/tollgate/tollgate/pipeline"

// Inspect implements pipeline.Inspector: each rule's report (GET
// /admin/limits).
func (f *Filter) Inspect(show func(kind string, state any)) {
	for _, r := range f.Rules() {
		show("limits", r)
	}
}

var _ pipeline.Inspector = (*Filter)(nil)
