package transcode

import (
	"testing"

	"github.com/tollgate/tollgate/internal/testutil"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
)

// benchJSON has scalar, string, nested and repeated fields (and a map),
// the shape the converter is to handle without allocating.
const benchJSON = `{"i32":42,"i64":"1234567890123","u32":7,"fl":1.5,"db":-2.25,"b":true,"s":"an order for two",` +
	`"color":"GREEN","child":{"s":"nested","i32":3,"child":{"s":"deeper"}},` +
	`"rI32":[1,2,3,4,5],"rS":["alpha","beta","gamma"],"rChild":[{"s":"a"},{"s":"b","i32":9}],"mStrI64":{"a":"1","b":"2"}}`

// BenchmarkConvert compares the converter with the dynamicpb and protojson
// path it replaced, each way.
func BenchmarkConvert(b *testing.B) {
	md := sinkDescriptor(b)
	plan, err := planFor(md)
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(benchJSON)
	ref := dynamicpb.NewMessage(md)
	if err := protojson.Unmarshal(body, ref); err != nil {
		b.Fatal(err)
	}
	wire, _ := proto.Marshal(ref)
	b.Run("json-to-wire", func(b *testing.B) {
		b.ReportAllocs()
		enc := new(wireEncoder)
		for b.Loop() {
			enc.out = enc.out[:0]
			if err := enc.encode(plan, body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("wire-to-json", func(b *testing.B) {
		b.ReportAllocs()
		w := new(jsonWriter)
		for b.Loop() {
			w.out = w.out[:0]
			if err := w.write(plan, wire); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("dynamicpb-json-to-wire", func(b *testing.B) {
		b.ReportAllocs()
		m := dynamicpb.NewMessage(md)
		var out []byte
		for b.Loop() {
			proto.Reset(m)
			if err := protojson.Unmarshal(body, m); err != nil {
				b.Fatal(err)
			}
			out, _ = proto.MarshalOptions{}.MarshalAppend(out[:0], m)
		}
	})
	b.Run("dynamicpb-wire-to-json", func(b *testing.B) {
		b.ReportAllocs()
		m := dynamicpb.NewMessage(md)
		var out []byte
		for b.Loop() {
			proto.Reset(m)
			if err := proto.Unmarshal(wire, m); err != nil {
				b.Fatal(err)
			}
			out, _ = protojson.MarshalOptions{}.MarshalAppend(out[:0], m)
		}
	})
}

// TestConvertDoesNotAllocate holds the converter to no allocations per
// call once its buffers have grown, both ways.
func TestConvertDoesNotAllocate(t *testing.T) {
	if testutil.Race {
		t.Skip("the race detector allocates")
	}
	md := sinkDescriptor(t)
	plan, err := planFor(md)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(benchJSON)
	enc, w := new(wireEncoder), new(jsonWriter)
	if err := enc.encode(plan, body); err != nil {
		t.Fatal(err)
	}
	wire := append([]byte(nil), enc.out...)
	if n := testing.AllocsPerRun(100, func() {
		enc.out = enc.out[:0]
		_ = enc.encode(plan, body)
	}); n != 0 {
		t.Errorf("JSON to wire: %v allocations per call", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		w.out = w.out[:0]
		_ = w.write(plan, wire)
	}); n != 0 {
		t.Errorf("wire to JSON: %v allocations per call", n)
	}
}
