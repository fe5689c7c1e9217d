package transcode

import (
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	// The well-known types' files, for the test schema's imports.
	_ "google.golang.org/protobuf/types/known/durationpb"
	_ "google.golang.org/protobuf/types/known/emptypb"
	_ "google.golang.org/protobuf/types/known/fieldmaskpb"
	_ "google.golang.org/protobuf/types/known/structpb"
	_ "google.golang.org/protobuf/types/known/timestamppb"
	_ "google.golang.org/protobuf/types/known/wrapperspb"
)

// kitchenSink is a proto3 message with a field of every kind the
// converter handles: all scalars, enums, nested and repeated messages,
// packed and unpacked lists, maps of several key kinds, a oneof, proto3
// optional, a custom json_name and the well-known types.
var kitchenSink = sync.OnceValues(func() (protoreflect.MessageDescriptor, error) {
	type F = descriptorpb.FieldDescriptorProto
	T := func(t descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto_Type { return &t }
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	rep := descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	n := int32(0)
	field := func(name string, typ descriptorpb.FieldDescriptorProto_Type, label *descriptorpb.FieldDescriptorProto_Label, typeName string) *F {
		n++
		f := &F{Name: proto.String(name), Number: proto.Int32(n), Type: T(typ), Label: label}
		if typeName != "" {
			f.TypeName = proto.String(typeName)
		}
		return f
	}
	const (
		msg  = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
		enum = descriptorpb.FieldDescriptorProto_TYPE_ENUM
	)
	var fields []*F
	add := func(f *F) *F { fields = append(fields, f); return f }
	for _, s := range []struct {
		name string
		typ  descriptorpb.FieldDescriptorProto_Type
	}{
		{"i32", descriptorpb.FieldDescriptorProto_TYPE_INT32}, {"i64", descriptorpb.FieldDescriptorProto_TYPE_INT64},
		{"u32", descriptorpb.FieldDescriptorProto_TYPE_UINT32}, {"u64", descriptorpb.FieldDescriptorProto_TYPE_UINT64},
		{"s32", descriptorpb.FieldDescriptorProto_TYPE_SINT32}, {"s64", descriptorpb.FieldDescriptorProto_TYPE_SINT64},
		{"f32", descriptorpb.FieldDescriptorProto_TYPE_FIXED32}, {"f64", descriptorpb.FieldDescriptorProto_TYPE_FIXED64},
		{"sf32", descriptorpb.FieldDescriptorProto_TYPE_SFIXED32}, {"sf64", descriptorpb.FieldDescriptorProto_TYPE_SFIXED64},
		{"fl", descriptorpb.FieldDescriptorProto_TYPE_FLOAT}, {"db", descriptorpb.FieldDescriptorProto_TYPE_DOUBLE},
		{"b", descriptorpb.FieldDescriptorProto_TYPE_BOOL}, {"s", descriptorpb.FieldDescriptorProto_TYPE_STRING},
		{"by", descriptorpb.FieldDescriptorProto_TYPE_BYTES},
	} {
		add(field(s.name, s.typ, opt, ""))
		add(field("r_"+s.name, s.typ, rep, ""))
	}
	add(field("color", enum, opt, ".fuzz.v1.Color"))
	add(field("r_color", enum, rep, ".fuzz.v1.Color"))
	add(field("child", msg, opt, ".fuzz.v1.Sink"))
	add(field("r_child", msg, rep, ".fuzz.v1.Sink"))
	var entries []*descriptorpb.DescriptorProto
	mapField := func(name string, key, val descriptorpb.FieldDescriptorProto_Type, valType string) {
		entry := ""
		for _, part := range strings.Split(name, "_") {
			entry += strings.ToUpper(part[:1]) + part[1:]
		}
		entry += "Entry"
		kf := &F{Name: proto.String("key"), Number: proto.Int32(1), Type: T(key), Label: opt}
		vf := &F{Name: proto.String("value"), Number: proto.Int32(2), Type: T(val), Label: opt}
		if valType != "" {
			vf.TypeName = proto.String(valType)
		}
		entries = append(entries, &descriptorpb.DescriptorProto{
			Name: proto.String(entry), Field: []*F{kf, vf},
			Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
		})
		add(field(name, msg, rep, ".fuzz.v1.Sink."+entry))
	}
	mapField("m_str_i64", descriptorpb.FieldDescriptorProto_TYPE_STRING, descriptorpb.FieldDescriptorProto_TYPE_INT64, "")
	mapField("m_i32_str", descriptorpb.FieldDescriptorProto_TYPE_INT32, descriptorpb.FieldDescriptorProto_TYPE_STRING, "")
	mapField("m_bool_child", descriptorpb.FieldDescriptorProto_TYPE_BOOL, msg, ".fuzz.v1.Sink")
	mapField("m_u64_color", descriptorpb.FieldDescriptorProto_TYPE_UINT64, enum, ".fuzz.v1.Color")
	mapField("m_s32_bytes", descriptorpb.FieldDescriptorProto_TYPE_SINT32, descriptorpb.FieldDescriptorProto_TYPE_BYTES, "")
	mapField("m_sf64_db", descriptorpb.FieldDescriptorProto_TYPE_SFIXED64, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE, "")
	mapField("m_str_value", descriptorpb.FieldDescriptorProto_TYPE_STRING, msg, ".google.protobuf.Value")
	oneof := func(f *F) { f.OneofIndex = proto.Int32(0) }
	oneof(add(field("o_str", descriptorpb.FieldDescriptorProto_TYPE_STRING, opt, "")))
	oneof(add(field("o_i32", descriptorpb.FieldDescriptorProto_TYPE_INT32, opt, "")))
	oneof(add(field("o_child", msg, opt, ".fuzz.v1.Sink")))
	oneof(add(field("o_null", enum, opt, ".google.protobuf.NullValue")))
	optional := func(f *F, idx int32) { f.OneofIndex = proto.Int32(idx); f.Proto3Optional = proto.Bool(true) }
	optional(add(field("opt_i32", descriptorpb.FieldDescriptorProto_TYPE_INT32, opt, "")), 1)
	optional(add(field("opt_str", descriptorpb.FieldDescriptorProto_TYPE_STRING, opt, "")), 2)
	optional(add(field("opt_color", enum, opt, ".fuzz.v1.Color")), 3)
	for _, wk := range []string{"Timestamp", "Duration", "Int64Value", "UInt32Value", "StringValue", "BoolValue",
		"DoubleValue", "FloatValue", "BytesValue", "Int32Value", "UInt64Value", "Struct", "Value", "ListValue", "FieldMask", "Empty"} {
		add(field("wk_"+wk, msg, opt, ".google.protobuf."+wk))
	}
	add(field("r_value", msg, rep, ".google.protobuf.Value"))
	add(field("r_timestamp", msg, rep, ".google.protobuf.Timestamp"))
	add(field("null", enum, opt, ".google.protobuf.NullValue"))
	named := add(field("json_named", descriptorpb.FieldDescriptorProto_TYPE_STRING, opt, ""))
	named.JsonName = proto.String("custom")
	f := &descriptorpb.FieldDescriptorProto{Name: proto.String("big_number"), Number: proto.Int32(536870911), Type: T(descriptorpb.FieldDescriptorProto_TYPE_UINT64), Label: opt}
	add(f)
	file := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("fuzz/v1/sink.proto"),
		Package: proto.String("fuzz.v1"),
		Syntax:  proto.String("proto3"),
		Dependency: []string{"google/protobuf/timestamp.proto", "google/protobuf/duration.proto",
			"google/protobuf/wrappers.proto", "google/protobuf/struct.proto", "google/protobuf/field_mask.proto",
			"google/protobuf/empty.proto"},
		EnumType: []*descriptorpb.EnumDescriptorProto{{
			Name: proto.String("Color"),
			Value: []*descriptorpb.EnumValueDescriptorProto{
				{Name: proto.String("COLOR_UNSPECIFIED"), Number: proto.Int32(0)},
				{Name: proto.String("RED"), Number: proto.Int32(1)},
				{Name: proto.String("GREEN"), Number: proto.Int32(2)},
				{Name: proto.String("BLUE"), Number: proto.Int32(-3)},
			},
		}},
		MessageType: []*descriptorpb.DescriptorProto{{
			Name:       proto.String("Sink"),
			Field:      fields,
			NestedType: entries,
			OneofDecl: []*descriptorpb.OneofDescriptorProto{
				{Name: proto.String("choice")}, {Name: proto.String("_opt_i32")},
				{Name: proto.String("_opt_str")}, {Name: proto.String("_opt_color")},
			},
		}},
	}
	fd, err := protodesc.NewFile(file, protoregistry.GlobalFiles)
	if err != nil {
		return nil, err
	}
	return fd.Messages().ByName("Sink"), nil
})

func sinkDescriptor(t testing.TB) protoreflect.MessageDescriptor {
	t.Helper()
	md, err := kitchenSink()
	if err != nil {
		t.Fatal(err)
	}
	return md
}
