package transcode

import (
	"encoding/base64"
	"math"
	"strconv"

	"github.com/tollgate/tollgate/internal/jsonstr"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// jsonWriter writes a message's wire bytes as protojson would write the
// message: fields in declaration order, proto3 zeros left out unless
// emitDefaults, the last of repeated occurrences of a singular field, the
// occurrences of a singular message merged, map keys sorted, unknown
// fields skipped.
type jsonWriter struct {
	out          []byte
	protoNames   bool
	emitDefaults bool
	spans        []span     // per field of the messages being written
	entries      []mapEntry // a map's entries being sorted
	merged       [][]byte   // buffers for messages given in several parts
	mergedUsed   int
}

// span is what the index pass learns of one field in one message.
type span struct {
	count int
	first int // offset of the first occurrence's tag
	last  int // offset of the last occurrence's tag
}

func (w *jsonWriter) write(mp *messagePlan, b []byte) error {
	if err := checkWire(mp, b, 1); err != nil {
		return err
	}
	w.mergedUsed = 0
	return w.message(mp, b)
}

// index fills w.spans[base:base+len(mp.fields)] for b.
func (w *jsonWriter) index(mp *messagePlan, b []byte) int {
	base := len(w.spans)
	for range mp.fields {
		w.spans = append(w.spans, span{})
	}
	for pos := 0; pos < len(b); {
		num, typ, n := protowire.ConsumeTag(b[pos:])
		tag := pos
		pos += n
		pos += protowire.ConsumeFieldValue(num, typ, b[pos:])
		i, ok := mp.byNum[num]
		if !ok || !mp.fields[i].accepts(typ) {
			continue
		}
		s := &w.spans[base+i]
		if s.count == 0 {
			s.first = tag
		}
		s.count++
		s.last = tag
	}
	return base
}

func (w *jsonWriter) message(mp *messagePlan, b []byte) error {
	if mp.wk != wkNone {
		return w.wellKnown(mp, b)
	}
	base := w.index(mp, b)
	defer func() { w.spans = w.spans[:base] }()
	w.out = append(w.out, '{')
	comma := false
	for i := range mp.fields {
		f := &mp.fields[i]
		s := w.spans[base+i]
		if s.count == 0 && !w.emitDefaults {
			continue
		}
		from := s.first
		if f.oneof >= 0 && s.count > 0 {
			cut, won := w.oneofCut(mp, base, i)
			if !won {
				s.count = 0
			} else if cut > from {
				from = cut
			}
		}
		mark := len(w.out)
		if comma {
			w.out = append(w.out, ',')
		}
		w.key(f)
		wrote, err := w.field(f, b, s, from)
		if err != nil {
			return err
		}
		if !wrote {
			w.out = w.out[:mark]
			continue
		}
		comma = true
	}
	w.out = append(w.out, '}')
	return nil
}

// oneofCut reports whether field i is the member of its oneof set last,
// and after which offset its occurrences count (a member set again after
// another starts afresh).
func (w *jsonWriter) oneofCut(mp *messagePlan, base, i int) (int, bool) {
	cut := -1
	for j := range mp.fields {
		if j == i || mp.fields[j].oneof != mp.fields[i].oneof {
			continue
		}
		if o := w.spans[base+j]; o.count > 0 {
			if o.last > w.spans[base+i].last {
				return 0, false
			}
			cut = max(cut, o.last)
		}
	}
	return cut, true
}

func (w *jsonWriter) key(f *fieldPlan) {
	if w.protoNames {
		w.out = append(w.out, f.protoKey...)
	} else {
		w.out = append(w.out, f.jsonKey...)
	}
}

// field writes the value of f (its name already written) and reports
// whether there was one to write.
func (w *jsonWriter) field(f *fieldPlan, b []byte, s span, from int) (bool, error) {
	switch {
	case f.isMap:
		n, err := w.mapValue(f, b, s, from)
		return n > 0 || (w.emitDefaults && n == 0), err
	case f.list:
		n, err := w.list(f, b, s, from)
		return n > 0 || w.emitDefaults, err
	case s.count == 0:
		return w.unset(f), nil
	case f.kind == protoreflect.MessageKind:
		return true, w.message(f.msg, w.singleMessage(f, b, from))
	}
	typ, at, _ := (&fieldIter{b: b, pos: s.last, f: f}).next()
	v, str := readValue(typ, b[at:])
	stringish := f.kind == protoreflect.StringKind || f.kind == protoreflect.BytesKind
	if !f.presence && ((!stringish && isZero(f.kind, v)) || (stringish && len(str) == 0)) {
		return w.unset(f), nil
	}
	return true, w.scalar(f, v, str)
}

// unset writes what emitDefaults shows for a field without a value.
func (w *jsonWriter) unset(f *fieldPlan) bool {
	if !w.emitDefaults || f.oneof >= 0 || f.optional {
		return false
	}
	if f.presence {
		w.out = append(w.out, "null"...)
		return true
	}
	_ = w.scalar(f, 0, []byte{})
	return true
}

// singleMessage returns the bytes of a singular message field: its one
// occurrence, or its occurrences joined, which protobuf reads as one
// message merged from all.
func (w *jsonWriter) singleMessage(f *fieldPlan, b []byte, from int) []byte {
	it := fieldIter{b: b, pos: from, f: f}
	_, at, _ := it.next()
	_, first := readValue(protowire.BytesType, b[at:])
	_, at2, more := it.next()
	if !more {
		return first
	}
	if w.mergedUsed == len(w.merged) {
		w.merged = append(w.merged, nil)
	}
	buf := append(w.merged[w.mergedUsed][:0], first...)
	for ok := true; ok; _, at2, ok = it.next() {
		_, part := readValue(protowire.BytesType, b[at2:])
		buf = append(buf, part...)
	}
	w.merged[w.mergedUsed] = buf
	w.mergedUsed++
	return buf
}

// list writes a repeated field's elements and returns how many.
func (w *jsonWriter) list(f *fieldPlan, b []byte, s span, from int) (int, error) {
	w.out = append(w.out, '[')
	n := 0
	if s.count > 0 {
		it := fieldIter{b: b, pos: from, f: f}
		for typ, at, ok := it.next(); ok; typ, at, ok = it.next() {
			v, str := readValue(typ, b[at:])
			if typ == protowire.BytesType && f.kind != protoreflect.StringKind &&
				f.kind != protoreflect.BytesKind && f.kind != protoreflect.MessageKind {
				wt := wireType(f.kind)
				for len(str) > 0 {
					pv, _ := readValue(wt, str)
					str = str[protowire.ConsumeFieldValue(1, wt, str):]
					if err := w.element(f, n, pv, nil); err != nil {
						return 0, err
					}
					n++
				}
				continue
			}
			if err := w.element(f, n, v, str); err != nil {
				return 0, err
			}
			n++
		}
	}
	w.out = append(w.out, ']')
	return n, nil
}

func (w *jsonWriter) element(f *fieldPlan, n int, v uint64, str []byte) error {
	if n > 0 {
		w.out = append(w.out, ',')
	}
	if f.kind == protoreflect.MessageKind {
		return w.message(f.msg, str)
	}
	return w.scalar(f, v, str)
}

// scalar writes a value of a scalar kind from its wire bits (or bytes).
func (w *jsonWriter) scalar(f *fieldPlan, v uint64, str []byte) error {
	o := w.out
	switch f.kind {
	case protoreflect.BoolKind:
		o = strconv.AppendBool(o, v != 0)
	case protoreflect.Int32Kind:
		o = strconv.AppendInt(o, int64(int32(v)), 10)
	case protoreflect.Sint32Kind:
		o = strconv.AppendInt(o, int64(int32(protowire.DecodeZigZag(v&math.MaxUint32))), 10)
	case protoreflect.Sfixed32Kind:
		o = strconv.AppendInt(o, int64(int32(uint32(v))), 10)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		o = strconv.AppendUint(o, uint64(uint32(v)), 10)
	case protoreflect.Int64Kind, protoreflect.Sfixed64Kind:
		o = append(strconv.AppendInt(append(o, '"'), int64(v), 10), '"')
	case protoreflect.Sint64Kind:
		o = append(strconv.AppendInt(append(o, '"'), protowire.DecodeZigZag(v), 10), '"')
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		o = append(strconv.AppendUint(append(o, '"'), v, 10), '"')
	case protoreflect.FloatKind:
		o = appendFloat(o, float64(math.Float32frombits(uint32(v))), 32)
	case protoreflect.DoubleKind:
		o = appendFloat(o, math.Float64frombits(v), 64)
	case protoreflect.StringKind:
		o = jsonstr.Append(o, str)
	case protoreflect.BytesKind:
		o = append(base64.StdEncoding.AppendEncode(append(o, '"'), str), '"')
	case protoreflect.EnumKind:
		switch name, ok := f.enum.names[int32(v)]; {
		case f.enum.nullValue:
			o = append(o, "null"...)
		case ok:
			o = append(o, name...)
		default:
			o = strconv.AppendInt(o, int64(int32(v)), 10)
		}
	case protoreflect.MessageKind:
		w.out = o
		return w.message(f.msg, str)
	}
	w.out = o
	return nil
}

// appendFloat writes a float as protojson does (encoding/json's choice
// of notation; NaN and the infinities as strings).
func appendFloat(out []byte, n float64, bits int) []byte {
	switch {
	case math.IsNaN(n):
		return append(out, `"NaN"`...)
	case math.IsInf(n, 1):
		return append(out, `"Infinity"`...)
	case math.IsInf(n, -1):
		return append(out, `"-Infinity"`...)
	}
	format := byte('f')
	if abs := math.Abs(n); abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	out = strconv.AppendFloat(out, n, format, -1, bits)
	if format == 'e' {
		if n := len(out); n >= 4 && out[n-4] == 'e' && out[n-3] == '-' && out[n-2] == '0' {
			out[n-2] = out[n-1]
			out = out[:n-1]
		}
	}
	return out
}

// field0 writes the message held in field f of the reply b (response_body:
// <field>), an empty one when b has none.
func (w *jsonWriter) field0(mp *messagePlan, f *fieldPlan, b []byte) error {
	if _, _, ok := (&fieldIter{b: b, f: f}).next(); !ok {
		return w.message(f.msg, nil)
	}
	return w.message(f.msg, w.singleMessage(f, b, 0))
}
