package otlp

import (
	"github.com/tollgate/tollgate/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// Attribute names: OpenTelemetry's semantic conventions where one fits,
// tollgate.* for what only the gateway knows.
var (
	attrMethod      = newAttrKey("http.request.method")
	attrRoute       = newAttrKey("http.route")
	attrStatus      = newAttrKey("http.response.status_code")
	attrClient      = newAttrKey("client.address")
	attrServer      = newAttrKey("server.address")
	attrRouteName   = newAttrKey("tollgate.route")
	attrConsumer    = newAttrKey("tollgate.consumer")
	attrDecision    = newAttrKey("tollgate.decision")
	attrNode        = newAttrKey("tollgate.node")
	attrService     = newAttrKey("tollgate.service")
	attrResult      = newAttrKey("tollgate.upstream.result")
	attrAttempts    = newAttrKey("tollgate.upstream.attempts")
	attrRequestID   = newAttrKey("tollgate.request_id")
	attrMessage     = newAttrKey("tollgate.message")
	attrDroppedSpan = newAttrKey("tollgate.dropped_child_spans")
)

// appendServerSpan writes the gateway's span of one request: named, as
// HTTP server spans are, by the method and the route's path.
func appendServerSpan(b []byte, r *trace.Recording) []byte {
	b, sp := beginMessage(b, fieldSpans)
	b = appendBytes(b, spanTraceID, r.TraceID[:])
	b = appendBytes(b, spanSpanID, r.SpanID[:])
	if r.ParentID != [8]byte{} {
		b = appendBytes(b, spanParentSpanID, r.ParentID[:])
	}
	b = protowire.AppendTag(b, spanName, protowire.BytesType)
	name := r.PathTemplate
	if name == "" {
		name = r.Route
	}
	n := len(r.Method())
	if name != "" {
		n += 1 + len(name)
	}
	b = protowire.AppendVarint(b, uint64(n))
	b = append(b, r.Method()...)
	if name != "" {
		b = append(b, ' ')
		b = append(b, name...)
	}
	b = appendVarintField(b, spanKind, kindServer)
	b = appendFixed64(b, spanStart, uint64(r.Start))
	b = appendFixed64(b, spanEnd, uint64(r.End))
	b = appendBytesAttr(b, spanAttributes, attrMethod, r.Method())
	b = appendStringAttr(b, spanAttributes, attrRoute, r.PathTemplate)
	b = appendIntAttr(b, spanAttributes, attrStatus, int64(r.Status))
	b = appendAddrAttr(b, spanAttributes, attrClient, r.Client)
	b = appendStringAttr(b, spanAttributes, attrRouteName, r.Route)
	b = appendStringAttr(b, spanAttributes, attrConsumer, r.Consumer)
	b = appendStringAttr(b, spanAttributes, attrDecision, r.Decision)
	b = appendStringAttr(b, spanAttributes, attrNode, r.Node)
	b = appendStringAttr(b, spanAttributes, attrService, r.Service)
	b = appendStringAttr(b, spanAttributes, attrResult, r.Result)
	if r.Attempts > 0 {
		b = appendIntAttr(b, spanAttributes, attrAttempts, int64(r.Attempts))
	}
	b = appendBytesAttr(b, spanAttributes, attrRequestID, r.RequestID)
	if r.DroppedSpans > 0 {
		b = appendIntAttr(b, spanAttributes, attrDroppedSpan, int64(r.DroppedSpans))
	}
	for _, ev := range r.Events() {
		var e int
		b, e = beginMessage(b, spanEvents)
		b = appendFixed64(b, eventTime, uint64(ev.Time))
		b = appendString(b, eventName, ev.Name)
		b = appendIntAttr(b, eventAttributes, attrStatus, int64(ev.Status))
		b = appendStringAttr(b, eventAttributes, attrMessage, ev.Message)
		b = endMessage(b, e)
	}
	if r.DroppedEvent > 0 {
		b = appendVarintField(b, spanDroppedEvents, uint64(r.DroppedEvent))
	}
	b = appendStatus(b, r.Status >= 500, r.Decision)
	return endMessage(b, sp)
}

// appendChildSpan writes one step of the request as a child of its
// server span.
func appendChildSpan(b []byte, r *trace.Recording, s *trace.Span) []byte {
	b, sp := beginMessage(b, fieldSpans)
	b = appendBytes(b, spanTraceID, r.TraceID[:])
	b = appendBytes(b, spanSpanID, s.ID[:])
	b = appendBytes(b, spanParentSpanID, r.SpanID[:])
	b = appendString(b, spanName, s.Kind.Name())
	kind := uint64(kindInternal)
	if s.Kind.Client() {
		kind = kindClient
	}
	b = appendVarintField(b, spanKind, kind)
	end := s.End
	if end == 0 {
		end = r.End // a step the request left without ending it
	}
	b = appendFixed64(b, spanStart, uint64(s.Start))
	b = appendFixed64(b, spanEnd, uint64(end))
	b = appendStringAttr(b, spanAttributes, attrServer, s.Instance)
	b = appendStringAttr(b, spanAttributes, attrService, s.Service)
	if s.Status > 0 {
		b = appendIntAttr(b, spanAttributes, attrStatus, int64(s.Status))
	}
	b = appendStringAttr(b, spanAttributes, attrResult, s.Result)
	b = appendStatus(b, s.Error, s.Result)
	return endMessage(b, sp)
}

// appendStatus marks a failed span as an error, with why.
func appendStatus(b []byte, failed bool, why string) []byte {
	if !failed {
		return b
	}
	b, st := beginMessage(b, spanStatus)
	if why != "" {
		b = appendString(b, statusMessage, why)
	}
	b = appendVarintField(b, statusCode, statusError)
	return endMessage(b, st)
}
