package tracing

import "github.com/tollgate/tollgate/pipeline"

var (
	spansExported = &pipeline.Family{Name: "tollgate_tracing_spans_exported_total",
		Help: "Spans the tracing backend accepted.", Type: pipeline.Counter}
	spansDropped = &pipeline.Family{Name: "tollgate_tracing_spans_dropped_total",
		Help: "Spans not exported: queue_full (the export queue was full; requests never wait for it) or export_failed (the backend refused them or stayed unreachable past the retries).",
		Type: pipeline.Counter, Labels: []string{"reason"}}
	exportRetries = &pipeline.Family{Name: "tollgate_tracing_export_retries_total",
		Help: "Export calls tried again after a retryable failure.", Type: pipeline.Counter}
	queueLength = &pipeline.Family{Name: "tollgate_tracing_queue_length",
		Help: "Requests' recordings waiting for export.", Type: pipeline.Gauge}
)

// Report implements pipeline.Reporter: the tracer is a shared object the
// metrics writer finds in the snapshot.
func (t *Tracer) Report(emit pipeline.Emit) {
	if t.exp == nil {
		return
	}
	st := t.exp.Stats()
	emit(spansExported, float64(st.Exported))
	emit(spansDropped, float64(st.Dropped), "queue_full")
	emit(spansDropped, float64(st.Failed), "export_failed")
	emit(exportRetries, float64(st.Retries))
	emit(queueLength, float64(st.Queued))
}
