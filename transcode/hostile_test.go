package transcode

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// TestHostileBodies: what a client may send to make the conversion slow
// or deep is bounded: a map of many keys costs linear time (a repeated key
// still found), nesting deeper than protobuf's limit is refused, and so
// is a reply nested past it.
func TestHostileBodies(t *testing.T) {
	plan, err := planFor(sinkDescriptor(t))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(`{"mStrI64":{`)
	const keys = 100000
	for i := range keys {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	many := b.String()
	enc := new(wireEncoder)
	start := time.Now()
	if err := enc.encode(plan, []byte(many+`"last":1}}`)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("%d map keys took %v", keys, d)
	}
	enc.out = enc.out[:0]
	if err := enc.encode(plan, []byte(many+`"k7":1}}`)); err == nil || !strings.Contains(err.Error(), "duplicate map key") {
		t.Fatalf("a repeated key among many: %v", err)
	}

	deep := strings.Repeat(`{"child":`, maxDepth+1) + "{}" + strings.Repeat("}", maxDepth+1)
	enc.out = enc.out[:0]
	if err := enc.encode(plan, []byte(deep)); err == nil || !strings.Contains(err.Error(), "recursion") {
		t.Fatalf("a body nested %d deep: %v", maxDepth+1, err)
	}

	// A reply of messages nested past the limit.
	child := plan.byProto["child"]
	num := plan.fields[child].num
	var reply []byte
	for range maxDepth + 1 {
		reply = protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), reply)
	}
	w := new(jsonWriter)
	if err := w.write(plan, reply); err == nil {
		t.Fatal("a reply nested past the limit was written")
	}
	// A truncated reply is refused whole, nothing half-written.
	w.out = w.out[:0]
	if err := w.write(plan, []byte{0x0a, 0x05, 'a'}); err == nil {
		t.Fatalf("a truncated reply: %s", w.out)
	}
}
