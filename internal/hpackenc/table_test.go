package hpackenc

import (
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// TestTableDecodes: blocks a Table encodes, read in order by x/net's
// decoder, give back every field as written: entered the first time and
// named by index after (a block of one byte per field), literals once the
// table is full, and the table emptied and its size said when the decoder
// lowers its limit (to 0: no entries at all) and raises it again.
func TestTableDecodes(t *testing.T) {
	var tab Table
	dec := hpack.NewDecoder(4096, nil)
	roundTrip := func(fields ...string) []byte {
		t.Helper()
		blk := tab.BeginBlock(nil)
		for i := 0; i < len(fields); i += 2 {
			blk = tab.AppendField(blk, fields[i], fields[i+1])
		}
		got, err := dec.DecodeFull(blk)
		if err != nil {
			t.Fatalf("%v: %v", fields, err)
		}
		if len(got)*2 != len(fields) {
			t.Fatalf("%d fields decoded of %d", len(got), len(fields)/2)
		}
		for i, f := range got {
			if f.Name != fields[2*i] || f.Value != fields[2*i+1] {
				t.Fatalf("field %d: %q: %q, want %q: %q", i, f.Name, f.Value, fields[2*i], fields[2*i+1])
			}
		}
		return blk
	}
	call := []string{":path", "/shop.v1.Orders/Create", ":authority", "10.0.0.7:9000",
		"content-type", "application/grpc", "te", "trailers", "user-agent", "tollgate"}
	first := roundTrip(call...)
	gen := tab.Gen()
	again := roundTrip(call...)
	if len(again) != 5 || len(first) < 60 || tab.Gen() != gen {
		t.Fatalf("blocks of %d then %d bytes, gen %d then %d", len(first), len(again), gen, tab.Gen())
	}
	// Another method enters its path; the first call's fields keep
	// decoding at their new indices.
	roundTrip(":path", "/shop.v1.Orders/Get")
	if tab.Gen() == gen {
		t.Fatal("an entry went in and the gen did not change")
	}
	roundTrip(call...)
	// Fields whose values vary: the name entered with the first value and
	// named by index after; the buffers they came from are not kept.
	buf := []byte("x-request-id0123")
	for i := range 5 {
		buf[len(buf)-1] = byte('0' + i)
		blk := tab.BeginBlock(nil)
		blk = tab.AppendVaryingField(blk, buf[:12], buf[12:])
		blk = tab.AppendVaryingField(blk, []byte("user-agent"), buf[12:])
		got, err := dec.DecodeFull(blk)
		if err != nil || len(got) != 2 || got[0].Name != "x-request-id" || got[0].Value != string(buf[12:]) ||
			got[1].Name != "user-agent" || got[1].Value != string(buf[12:]) {
			t.Fatalf("varying field %d: %v %v", i, got, err)
		}
		if i > 0 && len(blk) > 2*(2+1+4) { // a name index of two bytes, a length, the value
			t.Fatalf("varying field %d in %d bytes", i, len(blk))
		}
	}

	// Full: 4096 bytes hold about 80 of these; the rest go as literals.
	for i := range 200 {
		roundTrip(":path", "/svc/Method"+strconv.Itoa(i))
	}
	if tab.size > 4096 {
		t.Fatalf("table of %d bytes", tab.size)
	}
	roundTrip(call...)
	long := strings.Repeat("x", 5000)
	roundTrip("x-long", long)

	for _, limit := range []uint32{0, 100, 4096, 1 << 20} {
		dec.SetAllowedMaxDynamicTableSize(limit)
		tab.SetLimit(limit)
		roundTrip(call...)
		roundTrip(call...)
		if tab.size > int(limit) {
			t.Fatalf("limit %d: a table of %d bytes", limit, tab.size)
		}
	}
}

func BenchmarkTableIndexedBlock(b *testing.B) {
	b.ReportAllocs()
	var tab Table
	var blk []byte
	for range b.N {
		blk = tab.BeginBlock(blk[:0])
		blk = tab.AppendField(blk, ":path", "/shop.v1.Orders/Create")
		blk = tab.AppendField(blk, ":authority", "10.0.0.7:9000")
		blk = tab.AppendField(blk, "content-type", "application/grpc")
	}
}
