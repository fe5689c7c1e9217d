package transcode

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/tollgate/tollgate/internal/bytesconv"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// listField reads a JSON array into a repeated field: packed scalars as
// one length-delimited run, anything else one field per element.
func (e *wireEncoder) listField(f *fieldPlan) error {
	if err := e.sc.expect('['); err != nil {
		return err
	}
	if e.sc.peek() == ']' {
		e.sc.pos++
		return nil
	}
	if !f.packed {
		for {
			if err := e.value(f, f.num, false); err != nil {
				return err
			}
			if more, err := e.sc.more(']'); err != nil || !more {
				return err
			}
		}
	}
	e.out = protowire.AppendTag(e.out, f.num, protowire.BytesType)
	at := e.beginLen()
	for {
		v, err := e.numeric(f)
		if err != nil {
			return err
		}
		e.out = appendBits(e.out, f.kind, v)
		more, err := e.sc.more(']')
		if err != nil {
			return err
		}
		if !more {
			break
		}
	}
	e.endLen(at)
	return nil
}

// mapField reads a JSON object into a map field's entries, the key
// written first in each so that a repeated key can be found by comparing
// bytes with the entries already written.
func (e *wireEncoder) mapField(f *fieldPlan) error {
	if err := e.sc.expect('{'); err != nil {
		return err
	}
	if e.sc.peek() == '}' {
		e.sc.pos++
		return nil
	}
	keyPlan, valPlan := &f.msg.fields[0], &f.msg.fields[1]
	mapStart := len(e.out)
	// Keys are compared with the entries written so far, then, past a
	// few, looked up in a set: a body of many keys costs linear time.
	var keys map[string]struct{}
	entries := 0
	for {
		name, err := e.sc.str()
		if err != nil {
			return err
		}
		entryStart := len(e.out)
		e.out = protowire.AppendTag(e.out, f.num, protowire.BytesType)
		at := e.beginLen()
		if err := e.mapKey(keyPlan, name); err != nil {
			return fmt.Errorf("field %s: %w", f.jsonName, err)
		}
		if keys == nil && entries == linearKeys {
			keys = make(map[string]struct{})
			for rest := e.out[mapStart:entryStart]; len(rest) > 0; {
				_, _, n := protowire.ConsumeTag(rest)
				entry, m := protowire.ConsumeBytes(rest[n:])
				rest = rest[n+m:]
				keys[string(leadingField(entry))] = struct{}{}
			}
		}
		entries++
		if keys != nil {
			if _, dup := keys[string(e.out[at:])]; dup {
				return fmt.Errorf("field %s: duplicate map key %q", f.jsonName, name)
			}
			keys[string(e.out[at:])] = struct{}{}
		} else if repeatedKey(e.out[mapStart:entryStart], e.out[at:]) {
			return fmt.Errorf("field %s: duplicate map key %q", f.jsonName, name)
		}
		if err := e.sc.expect(':'); err != nil {
			return err
		}
		if err := e.value(valPlan, 2, false); err != nil {
			return err
		}
		e.endLen(at)
		more, err := e.sc.more('}')
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
	}
}

func (e *wireEncoder) mapKey(k *fieldPlan, name []byte) error {
	var v uint64
	s := bytesconv.B2S(name)
	switch k.kind {
	case protoreflect.StringKind:
		e.out = protowire.AppendTag(e.out, 1, protowire.BytesType)
		e.out = protowire.AppendBytes(e.out, name)
		return nil
	case protoreflect.BoolKind:
		switch s {
		case "true":
			v = 1
		case "false":
		default:
			return fmt.Errorf("invalid bool key %q", name)
		}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		bits := 64
		if wireType(k.kind) == protowire.Fixed32Type || k.kind == protoreflect.Int32Kind || k.kind == protoreflect.Sint32Kind {
			bits = 32
		}
		n, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			return fmt.Errorf("invalid %s key %q", k.kind, name)
		}
		v = signedBits(k.kind, n)
	default:
		bits := 64
		if k.kind == protoreflect.Uint32Kind || k.kind == protoreflect.Fixed32Kind {
			bits = 32
		}
		n, err := strconv.ParseUint(s, 10, bits)
		if err != nil {
			return fmt.Errorf("invalid %s key %q", k.kind, name)
		}
		v = n
	}
	e.out = protowire.AppendTag(e.out, 1, wireType(k.kind))
	e.out = appendBits(e.out, k.kind, v)
	return nil
}

// linearKeys is how many keys a map takes before its keys go in a set.
const linearKeys = 16

// leadingField is the first field's bytes (tag and value) of entry.
func leadingField(entry []byte) []byte {
	num, typ, n := protowire.ConsumeTag(entry)
	return entry[:n+protowire.ConsumeFieldValue(num, typ, entry[n:])]
}

// repeatedKey reports whether one of the entries already written (each a
// tag, a length and the key field first) has the key field key.
func repeatedKey(entries, key []byte) bool {
	for len(entries) > 0 {
		_, _, n := protowire.ConsumeTag(entries)
		entry, m := protowire.ConsumeBytes(entries[n:])
		entries = entries[n+m:]
		if bytes.Equal(leadingField(entry), key) {
			return true
		}
	}
	return false
}
