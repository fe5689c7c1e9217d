package transcode

import (
	"errors"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// A backend's reply is checked whole before any of it is written as JSON,
// so that a malformed reply is refused the way protobuf's runtime refuses
// it (bad tags, truncated values, strings that are not UTF-8, nesting
// deeper than its limit) instead of answering half a JSON document.

var errBadWire = errors.New("malformed protobuf")

// accepts reports whether a field of plan f is read from wire type t;
// protobuf keeps a value of any other type as an unknown field.
func (f *fieldPlan) accepts(t protowire.Type) bool {
	wt := wireType(f.kind)
	return t == wt || (f.list && t == protowire.BytesType && wt != protowire.BytesType)
}

func checkWire(mp *messagePlan, b []byte, depth int) error {
	if depth > maxDepth {
		return errTooDeep
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num > protowire.MaxValidNumber {
			return errBadWire
		}
		b = b[n:]
		f := mp.field(num)
		if f == nil || !f.accepts(typ) {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return errBadWire
			}
			b = b[n:]
			continue
		}
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return errBadWire
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return errBadWire
		}
		b = b[n:]
		switch f.kind {
		case protoreflect.StringKind:
			if !utf8.Valid(v) {
				return errors.New("a string field is not UTF-8")
			}
		case protoreflect.MessageKind:
			if err := checkWire(f.msg, v, depth+1); err != nil {
				return err
			}
		case protoreflect.BytesKind:
		default:
			if err := checkPacked(f.kind, v); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkPacked(k protoreflect.Kind, v []byte) error {
	t := wireType(k)
	for len(v) > 0 {
		n := protowire.ConsumeFieldValue(1, t, v)
		if n < 0 {
			return errBadWire
		}
		v = v[n:]
	}
	return nil
}

// readValue decodes a value of wire type t at the start of b: numbers
// as their bits, length-delimited values as their bytes. b has been
// checked.
func readValue(t protowire.Type, b []byte) (uint64, []byte) {
	switch t {
	case protowire.VarintType:
		v, _ := protowire.ConsumeVarint(b)
		return v, nil
	case protowire.Fixed32Type:
		v, _ := protowire.ConsumeFixed32(b)
		return uint64(v), nil
	case protowire.Fixed64Type:
		v, _ := protowire.ConsumeFixed64(b)
		return v, nil
	}
	v, _ := protowire.ConsumeBytes(b)
	return 0, v
}

// fieldIter walks the occurrences of one field in a message's bytes.
type fieldIter struct {
	b   []byte
	pos int
	f   *fieldPlan
}

// next returns the next occurrence's wire type and value position.
func (it *fieldIter) next() (protowire.Type, int, bool) {
	for it.pos < len(it.b) {
		num, typ, n := protowire.ConsumeTag(it.b[it.pos:])
		at := it.pos + n
		it.pos = at + protowire.ConsumeFieldValue(num, typ, it.b[at:])
		if num == it.f.num && it.f.accepts(typ) {
			return typ, at, true
		}
	}
	return 0, 0, false
}

// isZero reports whether bits v of kind k are the kind's zero (what
// proto3 leaves out).
func isZero(k protoreflect.Kind, v uint64) bool {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Uint32Kind,
		protoreflect.EnumKind, protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return uint32(v) == 0
	}
	return v == 0
}
