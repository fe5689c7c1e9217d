package otlp

import (
	"net/netip"

	"github.com/tollgate/tollgate/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// The OTLP trace messages are written by hand, field by field, from the
// opentelemetry-proto definitions (collector/trace/v1, trace/v1,
// common/v1, resource/v1): no generated code, no intermediate objects,
// straight into a pooled buffer.

// ExportTraceServiceRequest, ResourceSpans, ScopeSpans.
const (
	fieldResourceSpans = 1
	fieldResource      = 1
	fieldScopeSpans    = 2
	fieldScope         = 1
	fieldSpans         = 2
	fieldScopeName     = 1
	fieldScopeVersion  = 2
	fieldResourceAttrs = 1
)

// Span, Span.Event, Status.
const (
	spanTraceID       = 1
	spanSpanID        = 2
	spanParentSpanID  = 4
	spanName          = 5
	spanKind          = 6
	spanStart         = 7
	spanEnd           = 8
	spanAttributes    = 9
	spanEvents        = 11
	spanDroppedEvents = 12
	spanStatus        = 15
	eventTime         = 1
	eventName         = 2
	eventAttributes   = 3
	statusMessage     = 2
	statusCode        = 3
)

// KeyValue, AnyValue.
const (
	kvKey        = 1
	kvValue      = 2
	anyString    = 1
	anyInt       = 3
	kindInternal = 1
	kindServer   = 2
	kindClient   = 3
	statusError  = 2
)

// beginMessage starts the embedded message field num; endMessage, given
// what beginMessage returned, puts its length in front of it.
func beginMessage(b []byte, num protowire.Number) ([]byte, int) {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return b, len(b)
}

func endMessage(b []byte, start int) []byte {
	n := len(b) - start
	k := protowire.SizeVarint(uint64(n))
	b = append(b, make([]byte, k)...)
	copy(b[start+k:], b[start:start+n])
	protowire.AppendVarint(b[start:start], uint64(n))
	return b
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// Attributes are written with their lengths worked out first, not
// through beginMessage/endMessage: a span has a dozen of them, two
// messages deep each, and moving each into place would be most of the
// encoding's work. A key's own bytes (its field's tag, length and name)
// are encoded once (attrKey).

// attrKey is an attribute's key, encoded as KeyValue's key field.
type attrKey []byte

func newAttrKey(name string) attrKey { return appendString(nil, kvKey, name) }

// appendStringAttr adds a string attribute (a KeyValue) to the message
// being written as field num; an empty value is left out.
func appendStringAttr(b []byte, num protowire.Number, key attrKey, value string) []byte {
	if value == "" {
		return b
	}
	b = appendAttrHead(b, num, key, anyString, protowire.BytesType, protowire.SizeBytes(len(value)))
	return protowire.AppendString(b, value)
}

// appendBytesAttr is appendStringAttr for a value held as bytes.
func appendBytesAttr(b []byte, num protowire.Number, key attrKey, value []byte) []byte {
	if len(value) == 0 {
		return b
	}
	b = appendAttrHead(b, num, key, anyString, protowire.BytesType, protowire.SizeBytes(len(value)))
	return protowire.AppendBytes(b, value)
}

func appendIntAttr(b []byte, num protowire.Number, key attrKey, value int64) []byte {
	b = appendAttrHead(b, num, key, anyInt, protowire.VarintType, protowire.SizeVarint(uint64(value)))
	return protowire.AppendVarint(b, uint64(value))
}

func appendAddrAttr(b []byte, num protowire.Number, key attrKey, a netip.Addr) []byte {
	if !a.IsValid() {
		return b
	}
	var buf [64]byte
	return appendBytesAttr(b, num, key, a.AppendTo(buf[:0]))
}

// appendAttrHead writes a KeyValue up to its AnyValue's value: the field
// num, the key, and the AnyValue's field valueNum, whose encoded value
// (after its tag) takes valueSize bytes.
func appendAttrHead(b []byte, num protowire.Number, key attrKey, valueNum protowire.Number, typ protowire.Type, valueSize int) []byte {
	anySize := protowire.SizeTag(valueNum) + valueSize
	kvSize := len(key) + protowire.SizeTag(kvValue) + protowire.SizeBytes(anySize)
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(kvSize))
	b = append(b, key...)
	b = protowire.AppendTag(b, kvValue, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(anySize))
	return protowire.AppendTag(b, valueNum, typ)
}

// Resource is the resource every exported span belongs to (service.name
// and the operator's attributes), encoded once.
type Resource struct {
	encoded []byte
}

// NewResource encodes the resource attributes, in the order given.
func NewResource(attrs [][2]string) Resource {
	var b []byte
	for _, kv := range attrs {
		b = appendStringAttr(b, fieldResourceAttrs, newAttrKey(kv[0]), kv[1])
	}
	return Resource{encoded: b}
}

// scopeName names the instrumentation that made the spans.
const scopeName = "github.com/tollgate/tollgate/trace"

// AppendSpans appends the spans of one request, its server span and
// its children, each a ScopeSpans.spans field, to b: what AppendRequest
// puts together.
func AppendSpans(b []byte, r *trace.Recording) []byte {
	b = appendServerSpan(b, r)
	for i := range r.Spans() {
		b = appendChildSpan(b, r, &r.Spans()[i])
	}
	return b
}

// AppendRequest appends to b an ExportTraceServiceRequest holding spans
// (AppendSpans's) under res. The lengths are added up first, so nothing
// is moved into place.
func AppendRequest(b []byte, res Resource, version string, spans [][]byte) []byte {
	scopeLen := protowire.SizeTag(fieldScopeName) + protowire.SizeBytes(len(scopeName))
	if version != "" {
		scopeLen += protowire.SizeTag(fieldScopeVersion) + protowire.SizeBytes(len(version))
	}
	spansLen := 0
	for _, s := range spans {
		spansLen += len(s)
	}
	scopeSpansLen := protowire.SizeTag(fieldScope) + protowire.SizeBytes(scopeLen) + spansLen
	resourceSpansLen := protowire.SizeTag(fieldResource) + protowire.SizeBytes(len(res.encoded)) +
		protowire.SizeTag(fieldScopeSpans) + protowire.SizeBytes(scopeSpansLen)

	b = protowire.AppendTag(b, fieldResourceSpans, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(resourceSpansLen))
	b = appendBytes(b, fieldResource, res.encoded)
	b = protowire.AppendTag(b, fieldScopeSpans, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(scopeSpansLen))
	b = protowire.AppendTag(b, fieldScope, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(scopeLen))
	b = appendString(b, fieldScopeName, scopeName)
	if version != "" {
		b = appendString(b, fieldScopeVersion, version)
	}
	for _, s := range spans {
		b = append(b, s...)
	}
	return b
}
