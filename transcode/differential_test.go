package transcode

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
)

// The converter is held to protojson: for the same input both accept or
// both refuse, and what they produce means the same (decoded messages
// equal by proto.Equal; JSON equal as parsed values, protojson varying
// its whitespace on purpose).

var sinkSeeds = []string{
	`{}`,
	`{"i32":-5,"i64":"-9007199254740993","u32":4294967295,"u64":"18446744073709551615","s32":-2147483648,"s64":"-1",
	  "f32":7,"f64":"8","sf32":-9,"sf64":"-10","fl":1.5,"db":-2.25e-7,"b":true,"s":"h\u00e9\"llo\n","by":"aGVsbG8=",
	  "color":"GREEN","child":{"s":"nested","child":{"i32":1}}}`,
	`{"rI32":[1,-2,3],"r_s":["a","",  "c"],"rChild":[{},{"i32":2}],"rDb":[1,"NaN","Infinity","-Infinity",0],"rColor":["RED",2,7],"rBy":["", "AA=="]}`,
	`{"mStrI64":{"a":"1","b":2},"mI32Str":{"-1":"x","7":""},"mBoolChild":{"true":{"s":"t"},"false":{}},"mU64Color":{"18446744073709551615":"BLUE"},
	  "mS32Bytes":{"-3":"_-8="},"mSf64Db":{"-5":1e300},"mStrValue":{"n":null,"l":[1,"a",{"x":false}]}}`,
	`{"oStr":"x"}`, `{"oChild":{"i32":1}}`, `{"oNull":null}`, `{"oStr":null,"oI32":0}`,
	`{"optI32":0,"optStr":"","optColor":"COLOR_UNSPECIFIED"}`,
	`{"wkTimestamp":"2024-02-29T23:59:59.123456789+01:00","wkDuration":"-1.5s","wkInt64Value":"12","wkUInt32Value":3,
	  "wkStringValue":"","wkBoolValue":false,"wkDoubleValue":"NaN","wkFloatValue":1.25,"wkBytesValue":"AQI","wkInt32Value":-1,"wkUInt64Value":"4"}`,
	`{"wkStruct":{"a":{"b":[null,true,1.5,"s"]}},"wkValue":{"k":[]},"wkListValue":[1,[2,{}]],"wkFieldMask":"a.bC,d","wkEmpty":{}}`,
	`{"rValue":[null,1,"x"],"rTimestamp":["1970-01-01T00:00:00Z","0001-01-01T00:00:00Z"],"null":null,"custom":"c","big_number":"1"}`,
	`{"json_named":"p","i32":"1e2","u32":1.0e1,"i64":"12.000","fl":"3.5","db":"-0"}`,
	`{"i32":1e}`, `{"i32":2147483648}`, `{"s":"\ud800"}`, `{"i32":1,"i32":2}`, `{"i32":1,"i_32":2}`, `{"oStr":"a","oI32":1}`,
	`{"unknown":1}`, `{"mI32Str":{"1":"a","01":"b"}}`, `{"by":"@@"}`, `{"wkDuration":"1.0000000001s"}`, `{"wkFieldMask":"a_b"}`,
	`{"rI32":[1,]}`, `{"child":null,"wkValue":null}`, `[]`, `{"i32":01}`, `{"b":truex}`, ` {"s" : "a" } `, `{"r_child":[null]}`,
}

func FuzzJSONToWire(f *testing.F) {
	md := sinkDescriptor(f)
	plan, err := planFor(md)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range sinkSeeds {
		f.Add([]byte(s))
	}
	enc := new(wireEncoder)
	w := new(jsonWriter)
	f.Fuzz(func(t *testing.T, body []byte) {
		ref := dynamicpb.NewMessage(md)
		refErr := protojson.Unmarshal(body, ref)
		enc.out = enc.out[:0]
		err := enc.encode(plan, body)
		if (refErr == nil) != (err == nil) {
			t.Fatalf("%q: protojson says %v, the converter %v", body, refErr, err)
		}
		if err != nil {
			return
		}
		got := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(enc.out, got); err != nil {
			t.Fatalf("%q: the converter wrote bytes that do not decode: %v", body, err)
		}
		if !proto.Equal(ref, got) {
			t.Fatalf("%q:\nprotojson  %v\nconverter %v", body, ref, got)
		}
		// And back: the converter's JSON of its own bytes against
		// protojson's of its message.
		compareJSON(t, md.FullName(), w, plan, enc.out, ref, protojson.MarshalOptions{})
	})
}

func FuzzWireToJSON(f *testing.F) {
	md := sinkDescriptor(f)
	plan, err := planFor(md)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range sinkSeeds {
		m := dynamicpb.NewMessage(md)
		if protojson.Unmarshal([]byte(s), m) == nil {
			b, _ := proto.Marshal(m)
			f.Add(b, uint8(0))
			f.Add(b, uint8(3))
		}
	}
	f.Add([]byte{0x08, 0x01, 0x08, 0x02, 0xf8, 0xff, 0xff, 0xff, 0x0f, 0x01}, uint8(1)) // a repeated scalar, a big field number
	w := new(jsonWriter)
	f.Fuzz(func(t *testing.T, b []byte, flags uint8) {
		opts := protojson.MarshalOptions{UseProtoNames: flags&1 != 0, EmitUnpopulated: flags&2 != 0}
		ref := dynamicpb.NewMessage(md)
		if err := unmarshalReference(t, b, ref); err != nil {
			w.out = w.out[:0]
			if err := w.write(plan, b); err == nil {
				t.Fatalf("%x: protobuf refuses it (%v), the converter wrote %s", b, err, w.out)
			}
			return
		}
		compareJSON(t, md.FullName(), w, plan, b, ref, opts)
	})
}

// compareJSON writes b with w and compares it with protojson's writing of
// ref (the same message): both refuse, or both write the same JSON value.
func compareJSON(t *testing.T, name any, w *jsonWriter, plan *messagePlan, b []byte, ref proto.Message, opts protojson.MarshalOptions) {
	t.Helper()
	want, refErr := opts.Marshal(ref)
	w.out, w.protoNames, w.emitDefaults = w.out[:0], opts.UseProtoNames, opts.EmitUnpopulated
	err := w.write(plan, b)
	if (refErr == nil) != (err == nil) {
		t.Fatalf("%s %x: protojson says %v, the converter %v (%s)", name, b, refErr, err, w.out)
	}
	if err != nil {
		return
	}
	var x, y any
	dx := json.NewDecoder(bytes.NewReader(want))
	dx.UseNumber()
	dy := json.NewDecoder(bytes.NewReader(w.out))
	dy.UseNumber()
	if err := dx.Decode(&x); err != nil {
		t.Fatalf("protojson wrote %s: %v", want, err)
	}
	if err := dy.Decode(&y); err != nil {
		t.Fatalf("the converter wrote %s: %v", w.out, err)
	}
	if !reflect.DeepEqual(x, y) {
		t.Fatalf("%x:\nprotojson  %s\nconverter %s", b, want, w.out)
	}
}

// unmarshalReference is proto.Unmarshal, except that where protobuf's
// dynamic messages panic (a map entry whose key has another wire type
// than its field's) there is no reference to compare with: the input is
// skipped. The converter reads such a key as protobuf's generated code
// does, as an unknown field, leaving the key its zero.
func unmarshalReference(t *testing.T, b []byte, m proto.Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			t.Skipf("protobuf's dynamic message panics on %x: %v", b, r)
		}
	}()
	return proto.Unmarshal(b, m)
}
