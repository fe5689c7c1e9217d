package record

import "github.com/tollgate/tollgate/pipeline"

// Figures for /metrics, read when Prometheus scrapes.
var (
	famRecorded = &pipeline.Family{Name: "tollgate_recording_requests_total",
		Help: "Requests chosen for recording, by what became of them: queued for the writer, or dropped because its queue was full.",
		Type: pipeline.Counter, Labels: []string{"result"}}
	famRecordOn = &pipeline.Family{Name: "tollgate_recording_on",
		Help: "Whether the route's record rule is switched on.", Type: pipeline.Gauge}

	famWritten = &pipeline.Family{Name: "tollgate_recording_written_total",
		Help: "Records written to recording files.", Type: pipeline.Counter}
	famWriteFailed = &pipeline.Family{Name: "tollgate_recording_write_failures_total",
		Help: "Records lost because a recording file could not be made or written.", Type: pipeline.Counter}
	famRotations = &pipeline.Family{Name: "tollgate_recording_rotations_total",
		Help: "Recording files started after the previous one reached max_file_bytes or max_file_age.", Type: pipeline.Counter}
	famQueue = &pipeline.Family{Name: "tollgate_recording_queue_length",
		Help: "Records waiting for the recording writer.", Type: pipeline.Gauge}
	famFiles = &pipeline.Family{Name: "tollgate_recording_files",
		Help: "Recording files in the directory after the last pruning.", Type: pipeline.Gauge}
)

// Report implements pipeline.Reporter.
func (r *Recorder) Report(emit pipeline.Emit) {
	queued, dropped := r.Counts()
	emit(famRecorded, float64(queued), "queued")
	emit(famRecorded, float64(dropped), "dropped")
	on := 0.0
	if r.On() {
		on = 1
	}
	emit(famRecordOn, on)
}

// Report implements pipeline.Reporter.
func (w *Writer) Report(emit pipeline.Emit) {
	st := w.Stats()
	emit(famWritten, float64(st.Written))
	emit(famWriteFailed, float64(st.Failed))
	emit(famRotations, float64(st.Rotations))
	emit(famQueue, float64(st.Queued))
	emit(famFiles, float64(st.Files))
}
