package transcode

import (
	"fmt"

	"github.com/tollgate/tollgate/internal/jsonstr"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The converter reads and writes protobuf's wire format directly, driven
// by plans built from the descriptors when the configuration loads: per
// message type, its fields' numbers, kinds and both JSON names, so that a
// call converts without building messages or looking anything up by
// reflection.

// wellKnown marks the google.protobuf types protojson writes as something
// other than an object of their fields.
type wellKnown uint8

const (
	wkNone wellKnown = iota
	wkTimestamp
	wkDuration
	wkWrapper
	wkStruct
	wkValue
	wkListValue
	wkFieldMask
)

// maxDepth bounds message nesting both ways, as protobuf's runtime does.
const maxDepth = 10000

type fieldPlan struct {
	num      protowire.Number
	kind     protoreflect.Kind
	list     bool
	packed   bool // written packed (proto3 repeated scalars)
	isMap    bool
	presence bool // explicit presence: messages, optional, oneof members
	oneof    int  // index of the containing oneof, -1 when none
	// optional is a proto3 optional field: protojson leaves it out when
	// unset even when emitting defaults.
	optional bool
	index    int
	// jsonKey and protoKey are the quoted names with their colon, ready
	// to append.
	jsonKey, protoKey []byte
	jsonName          string
	msg               *messagePlan // message fields; for maps the entry
	enum              *enumPlan
}

type messagePlan struct {
	fullName string
	wk       wellKnown
	fields   []fieldPlan    // declaration order, protojson's output order
	byName   map[string]int // JSON names and proto names
	byProto  map[string]int // proto names only (URL parameters try them first)
	byNum    map[protowire.Number]int
	oneofs   int
}

type enumPlan struct {
	fullName  string
	nullValue bool // google.protobuf.NullValue: JSON null
	byName    map[string]int32
	names     map[int32][]byte // quoted, the first name declared per number
}

// field returns the plan of field number num, nil when the message has
// none.
func (m *messagePlan) field(num protowire.Number) *fieldPlan {
	if i, ok := m.byNum[num]; ok {
		return &m.fields[i]
	}
	return nil
}

type planner struct {
	msgs  map[protoreflect.FullName]*messagePlan
	enums map[protoreflect.FullName]*enumPlan
}

// planFor builds the plan of md and of every message it reaches.
func planFor(md protoreflect.MessageDescriptor) (*messagePlan, error) {
	p := &planner{msgs: map[protoreflect.FullName]*messagePlan{}, enums: map[protoreflect.FullName]*enumPlan{}}
	return p.message(md)
}

func wellKnownOf(name protoreflect.FullName) (wellKnown, error) {
	if name.Parent() != "google.protobuf" {
		return wkNone, nil
	}
	switch name.Name() {
	case "Timestamp":
		return wkTimestamp, nil
	case "Duration":
		return wkDuration, nil
	case "BoolValue", "Int32Value", "Int64Value", "UInt32Value", "UInt64Value",
		"FloatValue", "DoubleValue", "StringValue", "BytesValue":
		return wkWrapper, nil
	case "Struct":
		return wkStruct, nil
	case "Value":
		return wkValue, nil
	case "ListValue":
		return wkListValue, nil
	case "FieldMask":
		return wkFieldMask, nil
	case "Any":
		// Its JSON names a type by URL; the gateway would need every type
		// a backend might put in it, so a method using it is refused at
		// load rather than failing on the first call that carries one.
		return wkNone, fmt.Errorf("%s: google.protobuf.Any is not transcoded", name)
	}
	return wkNone, nil
}

func (p *planner) message(md protoreflect.MessageDescriptor) (*messagePlan, error) {
	if mp := p.msgs[md.FullName()]; mp != nil {
		return mp, nil
	}
	wk, err := wellKnownOf(md.FullName())
	if err != nil {
		return nil, err
	}
	fds := md.Fields()
	mp := &messagePlan{
		fullName: string(md.FullName()),
		wk:       wk,
		fields:   make([]fieldPlan, fds.Len()),
		byName:   make(map[string]int, 2*fds.Len()),
		byProto:  make(map[string]int, fds.Len()),
		byNum:    make(map[protowire.Number]int, fds.Len()),
		oneofs:   md.Oneofs().Len(),
	}
	p.msgs[md.FullName()] = mp
	for i := range fds.Len() {
		fd := fds.Get(i)
		f := &mp.fields[i]
		if err := p.field(f, fd, i); err != nil {
			return nil, fmt.Errorf("%s.%s: %w", md.FullName(), fd.Name(), err)
		}
		mp.byNum[f.num] = i
	}
	// protojson looks a name up as a JSON name first, then as the proto
	// name: JSON names win a clash.
	for i := range fds.Len() {
		mp.byName[string(fds.Get(i).Name())] = i
		mp.byProto[string(fds.Get(i).Name())] = i
	}
	for i := range fds.Len() {
		mp.byName[fds.Get(i).JSONName()] = i
	}
	return mp, nil
}

func (p *planner) field(f *fieldPlan, fd protoreflect.FieldDescriptor, index int) error {
	if fd.Kind() == protoreflect.GroupKind {
		return fmt.Errorf("groups are not transcoded")
	}
	if fd.Cardinality() == protoreflect.Required {
		return fmt.Errorf("required fields are not transcoded")
	}
	*f = fieldPlan{
		num:      fd.Number(),
		kind:     fd.Kind(),
		list:     fd.IsList(),
		packed:   fd.IsList() && fd.IsPacked(),
		isMap:    fd.IsMap(),
		presence: fd.HasPresence(),
		oneof:    -1,
		index:    index,
		jsonName: fd.JSONName(),
		jsonKey:  append(jsonstr.AppendString(nil, fd.JSONName()), ':'),
		protoKey: append(jsonstr.AppendString(nil, string(fd.Name())), ':'),
	}
	if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
		f.oneof = od.Index()
	}
	f.optional = fd.HasOptionalKeyword() && fd.ContainingOneof() != nil
	switch fd.Kind() {
	case protoreflect.MessageKind:
		mp, err := p.message(fd.Message())
		if err != nil {
			return err
		}
		f.msg = mp
	case protoreflect.EnumKind:
		ed := fd.Enum()
		if ed.IsClosed() {
			return fmt.Errorf("closed (proto2) enum %s is not transcoded", ed.FullName())
		}
		f.enum = p.enum(ed)
	}
	return nil
}

func (p *planner) enum(ed protoreflect.EnumDescriptor) *enumPlan {
	if ep := p.enums[ed.FullName()]; ep != nil {
		return ep
	}
	vals := ed.Values()
	ep := &enumPlan{
		fullName:  string(ed.FullName()),
		nullValue: ed.FullName() == "google.protobuf.NullValue",
		byName:    make(map[string]int32, vals.Len()),
		names:     make(map[int32][]byte, vals.Len()),
	}
	for i := range vals.Len() {
		v := vals.Get(i)
		ep.byName[string(v.Name())] = int32(v.Number())
		if _, ok := ep.names[int32(v.Number())]; !ok {
			ep.names[int32(v.Number())] = jsonstr.AppendString(nil, string(v.Name()))
		}
	}
	p.enums[ed.FullName()] = ep
	return ep
}

// wireType is the wire type of one value of kind k.
func wireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind:
		return protowire.BytesType
	}
	return protowire.VarintType
}
