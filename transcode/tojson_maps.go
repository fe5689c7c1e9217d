package transcode

import (
	"bytes"
	"cmp"
	"slices"
	"strconv"

	"github.com/tollgate/tollgate/internal/jsonstr"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// mapEntry is one entry of a map field on the wire, with its key decoded
// for sorting.
type mapEntry struct {
	entry  []byte
	str    []byte // string keys
	strKey bool
	num    uint64 // other keys: unsigned, or signed as int64 bits
	signed bool
}

func compareEntries(a, b mapEntry) int {
	switch {
	case a.strKey:
		return bytes.Compare(a.str, b.str)
	case a.signed:
		return cmp.Compare(int64(a.num), int64(b.num))
	}
	return cmp.Compare(a.num, b.num)
}

// mapValue writes a map field as an object, keys in protojson's order
// (sorted) and the last entry of a repeated key winning, as protobuf
// reads them. It returns how many keys it wrote.
func (w *jsonWriter) mapValue(f *fieldPlan, b []byte, s span, from int) (int, error) {
	w.out = append(w.out, '{')
	if s.count == 0 {
		w.out = append(w.out, '}')
		return 0, nil
	}
	keyPlan := &f.msg.fields[0]
	base := len(w.entries)
	defer func() { w.entries = w.entries[:base] }()
	it := fieldIter{b: b, pos: from, f: f}
	for _, at, ok := it.next(); ok; _, at, ok = it.next() {
		_, entry := readValue(protowire.BytesType, b[at:])
		e := mapEntry{entry: entry, strKey: keyPlan.kind == protoreflect.StringKind}
		if typ, kat, ok := lastOf(keyPlan, entry); ok {
			e.num, e.str = readValue(typ, entry[kat:])
		}
		e.num, e.signed = mapKeyBits(keyPlan.kind, e.num)
		w.entries = append(w.entries, e)
	}
	entries := w.entries[base:]
	slices.SortStableFunc(entries, compareEntries)
	n := 0
	for i := range entries {
		if i+1 < len(entries) && compareEntries(entries[i], entries[i+1]) == 0 {
			continue // a later entry has the same key
		}
		if n > 0 {
			w.out = append(w.out, ',')
		}
		n++
		w.mapKey(keyPlan.kind, entries[i])
		w.out = append(w.out, ':')
		if err := w.mapEntryValue(f.msg, entries[i].entry); err != nil {
			return 0, err
		}
	}
	w.out = append(w.out, '}')
	return n, nil
}

// lastOf finds the last occurrence of field f in b.
func lastOf(f *fieldPlan, b []byte) (protowire.Type, int, bool) {
	it := fieldIter{b: b, f: f}
	var typ protowire.Type
	var at int
	found := false
	for t, a, ok := it.next(); ok; t, a, ok = it.next() {
		typ, at, found = t, a, true
	}
	return typ, at, found
}

// mapKeyBits turns a key's wire bits into a value that sorts as the key.
func mapKeyBits(k protoreflect.Kind, v uint64) (uint64, bool) {
	switch k {
	case protoreflect.Int32Kind:
		return uint64(int64(int32(v))), true
	case protoreflect.Sint32Kind:
		return uint64(int64(int32(protowire.DecodeZigZag(v & 0xffffffff)))), true
	case protoreflect.Sfixed32Kind:
		return uint64(int64(int32(uint32(v)))), true
	case protoreflect.Int64Kind, protoreflect.Sfixed64Kind:
		return v, true
	case protoreflect.Sint64Kind:
		return uint64(protowire.DecodeZigZag(v)), true
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return uint64(uint32(v)), false
	case protoreflect.BoolKind:
		if v != 0 {
			return 1, false
		}
		return 0, false
	}
	return v, false
}

func (w *jsonWriter) mapKey(k protoreflect.Kind, e mapEntry) {
	switch {
	case k == protoreflect.StringKind:
		w.out = jsonstr.Append(w.out, e.str)
	case k == protoreflect.BoolKind:
		w.out = append(strconv.AppendBool(append(w.out, '"'), e.num != 0), '"')
	case e.signed:
		w.out = append(strconv.AppendInt(append(w.out, '"'), int64(e.num), 10), '"')
	default:
		w.out = append(strconv.AppendUint(append(w.out, '"'), e.num, 10), '"')
	}
}

// mapEntryValue writes an entry's value; an entry without one holds its
// type's zero (an empty message for message values).
func (w *jsonWriter) mapEntryValue(entry *messagePlan, b []byte) error {
	vp := &entry.fields[1]
	typ, at, ok := lastOf(vp, b)
	if vp.kind == protoreflect.MessageKind {
		if !ok {
			return w.message(vp.msg, nil)
		}
		return w.message(vp.msg, w.singleMessage(vp, b, 0))
	}
	if !ok {
		return w.scalar(vp, 0, []byte{})
	}
	v, str := readValue(typ, b[at:])
	return w.scalar(vp, v, str)
}
