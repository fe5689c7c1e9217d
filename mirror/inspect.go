package mirror

import "github.com/tollgate/tollgate/pipeline"

// Inspect implements pipeline.Inspector: the mirror rule's figures.
func (m *Filter) Inspect(show func(kind string, state any)) {
	show("mirror", m.Counts())
}

var _ pipeline.Inspector = (*Filter)(nil)
