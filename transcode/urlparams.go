package transcode

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/internal/bytesconv"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Path variables and query parameters are appended to the request's wire
// bytes after the body's: protobuf reads a later scalar over an earlier
// one, appends to repeated fields and merges into messages, which is what
// setting the field by its path means.

// maxFieldPath bounds a dotted field path's elements.
const maxFieldPath = 16

// resolvePath finds the plans along a dotted path ("shelf.name"), each
// element by proto name or JSON name, all but the last singular messages.
func resolvePath(mp *messagePlan, path string, into *[maxFieldPath]*fieldPlan) ([]*fieldPlan, error) {
	out := into[:0]
	rest := path
	for {
		name, after, more := strings.Cut(rest, ".")
		i, ok := mp.byProto[name]
		if !ok {
			i, ok = mp.byName[name]
		}
		if !ok {
			return nil, fmt.Errorf("%s has no field %q", mp.fullName, name)
		}
		if len(out) == maxFieldPath {
			return nil, fmt.Errorf("field path %q is too deep", path)
		}
		f := &mp.fields[i]
		out = append(out, f)
		if !more {
			return out, nil
		}
		if f.kind != protoreflect.MessageKind || f.list || f.isMap {
			return nil, fmt.Errorf("field %q is not a message", name)
		}
		mp, rest = f.msg, after
	}
}

// setField appends the field at path set to value, parsed as the field's
// type. An unknown field is an error only when required (a path
// variable); unknown query parameters are left alone: they may be the
// gateway's own (a signature's) or a client's extra.
func (e *wireEncoder) setField(mp *messagePlan, path, value string, required bool) error {
	var buf [maxFieldPath]*fieldPlan
	fps, err := resolvePath(mp, path, &buf)
	if err != nil {
		if required {
			return err
		}
		return nil
	}
	f := fps[len(fps)-1]
	if f.isMap || f.kind == protoreflect.MessageKind {
		return fmt.Errorf("field %q cannot be set from a URL", path)
	}
	start := len(e.out)
	var lens [maxFieldPath]int
	for i, p := range fps[:len(fps)-1] {
		e.out = protowire.AppendTag(e.out, p.num, protowire.BytesType)
		lens[i] = e.beginLen()
	}
	if err := e.urlValue(f, value); err != nil {
		e.out = e.out[:start]
		return fmt.Errorf("field %q: %v", path, err)
	}
	for i := len(fps) - 2; i >= 0; i-- {
		e.endLen(lens[i])
	}
	return nil
}

// urlValue appends field f set to the text s.
func (e *wireEncoder) urlValue(f *fieldPlan, s string) error {
	bad := func() error { return fmt.Errorf("invalid %s %q", f.kind, s) }
	var v uint64
	switch f.kind {
	case protoreflect.StringKind:
		e.out = protowire.AppendTag(e.out, f.num, protowire.BytesType)
		e.out = protowire.AppendString(e.out, s)
		return nil
	case protoreflect.BytesKind:
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			if b, err = base64.URLEncoding.DecodeString(s); err != nil {
				return bad()
			}
		}
		e.out = protowire.AppendTag(e.out, f.num, protowire.BytesType)
		e.out = protowire.AppendBytes(e.out, b)
		return nil
	case protoreflect.BoolKind:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return bad()
		}
		v = protowire.EncodeBool(b)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return bad()
		}
		v = signedBits(f.kind, n)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return bad()
		}
		v = signedBits(f.kind, n)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return bad()
		}
		v = n
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return bad()
		}
		v = n
	case protoreflect.FloatKind:
		n, err := strconv.ParseFloat(s, 32)
		if err != nil {
			return bad()
		}
		v = uint64(math.Float32bits(float32(n)))
	case protoreflect.DoubleKind:
		n, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return bad()
		}
		v = math.Float64bits(n)
	case protoreflect.EnumKind:
		n, ok := f.enum.byName[s]
		if !ok {
			x, err := strconv.ParseInt(s, 10, 32)
			if _, known := f.enum.names[int32(x)]; err != nil || !known {
				return fmt.Errorf("%q is not a value of %s", s, f.enum.fullName)
			}
			n = int32(x)
		}
		v = uint64(int64(n))
	default:
		return fmt.Errorf("type %s cannot be set from a URL", f.kind)
	}
	e.out = protowire.AppendTag(e.out, f.num, wireType(f.kind))
	e.out = appendBits(e.out, f.kind, v)
	return nil
}

// urlKey is a query key as a string for the lookups of one request.
func urlKey(k []byte) string { return bytesconv.B2S(k) }
