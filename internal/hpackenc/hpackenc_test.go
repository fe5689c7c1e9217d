package hpackenc

import (
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// TestAppendFieldDecodes: what the static-table encoder writes, x/net's
// decoder reads back as written (names lowercased), for every name of
// the static table, names it lacks, Huffman-worthy and raw values, long
// ones (multi-byte lengths), and every status.
func TestAppendFieldDecodes(t *testing.T) {
	type field struct{ name, value string }
	var fields []field
	for name := range staticNames {
		fields = append(fields, field{strings.ToUpper(name[:1]) + name[1:], "v-" + name})
	}
	fields = append(fields,
		field{"X-Request-Id", "0123456789abcdef"},
		field{"Content-Type", "application/grpc"},
		field{"X-Empty", ""},
		field{"X-Binary", "\x01\x7f~~~~\xff"},
		field{"X-Long", strings.Repeat("z", 5000)},
		field{strings.Repeat("N", 300), "long name"},
	)
	var blk, scratch []byte
	var want []hpack.HeaderField
	for code := 100; code <= 999; code++ {
		blk = AppendStatus(blk[:0], code)
		got, err := hpack.NewDecoder(4096, nil).DecodeFull(blk)
		if err != nil || len(got) != 1 || got[0].Name != ":status" || got[0].Value != statusText(code) {
			t.Fatalf("status %d: %v %v", code, got, err)
		}
	}
	for _, f := range fields {
		want = append(want, hpack.HeaderField{Name: strings.ToLower(f.name), Value: f.value})
	}
	for _, appendField := range []func(dst, scratch, name, value []byte) ([]byte, []byte){AppendField, AppendRawField} {
		blk = blk[:0]
		for _, f := range fields {
			blk, scratch = appendField(blk, scratch, []byte(f.name), []byte(f.value))
		}
		decodesAs(t, blk, want)
	}
	if got := AppendIndexed(nil, MethodPost); len(got) != 1 {
		t.Fatalf("an indexed field in %d bytes", len(got))
	}
	decodesAs(t, AppendIndexed(AppendIndexed(nil, MethodPost), SchemeHTTP),
		[]hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}})
}

func decodesAs(t *testing.T, blk []byte, want []hpack.HeaderField) {
	t.Helper()
	dec := hpack.NewDecoder(4096, nil)
	dec.SetMaxStringLength(1 << 20)
	got, err := dec.DecodeFull(blk)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d fields decoded, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Value != want[i].Value {
			t.Fatalf("field %d: %q: %q, want %q: %q", i, got[i].Name, got[i].Value, want[i].Name, want[i].Value)
		}
	}
}

func statusText(code int) string {
	return string([]byte{byte('0' + code/100), byte('0' + code/10%10), byte('0' + code%10)})
}

func BenchmarkAppendField(b *testing.B) {
	b.ReportAllocs()
	var blk, scratch []byte
	for range b.N {
		blk = AppendStatus(blk[:0], 200)
		blk, scratch = AppendField(blk, scratch, []byte("Content-Type"), []byte("text/plain; charset=utf-8"))
		blk, scratch = AppendField(blk, scratch, []byte("Content-Length"), []byte("1234"))
		blk, scratch = AppendField(blk, scratch, []byte("X-Request-Id"), []byte("0123456789abcdef"))
	}
}
