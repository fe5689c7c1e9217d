package record

import "github.com/tollgate/tollgate/pipeline"

// RecorderStatus is what the admin API shows of a route's record rule.
type RecorderStatus struct {
	On      bool    `json:"on"`
	Sample  float64 `json:"sample"`
	Queued  uint64  `json:"queued"`
	Dropped uint64  `json:"dropped"`
}

// Inspect implements pipeline.Inspector: whether the rule records, its
// share and what it handed to the writer.
func (r *Recorder) Inspect(show func(kind string, state any)) {
	queued, dropped := r.Counts()
	show("record", RecorderStatus{On: r.On(), Sample: r.Sample(), Queued: queued, Dropped: dropped})
}

// Inspect implements pipeline.Inspector: the writer's queue and files.
func (w *Writer) Inspect(show func(kind string, state any)) {
	show("recording", w.Stats())
}

var (
	_ pipeline.Inspector = (*Recorder)(nil)
	_ pipeline.Switcher  = (*Recorder)(nil)
	_ pipeline.Inspector = (*Writer)(nil)
)
