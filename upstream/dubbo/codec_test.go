package dubbo

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// roundTrip writes JSON as Hessian for a parameter of javaType and reads
// it back as JSON.
func roundTrip(t *testing.T, javaType, doc string) string {
	t.Helper()
	p, err := NewParam(javaType)
	if err != nil {
		t.Fatal(err)
	}
	h, err := p.AppendJSON(nil, []byte(doc))
	if err != nil {
		t.Fatalf("%s %s: %v", javaType, doc, err)
	}
	r := newDecoder(h, nil)
	if err := r.value(); err != nil {
		t.Fatalf("decoding %s: %v (% x)", doc, err, h)
	}
	if r.i != len(h) {
		t.Fatalf("decoding %s left %d bytes", doc, len(h)-r.i)
	}
	return string(r.out)
}

func TestJSONHessianRoundTrip(t *testing.T) {
	long := strings.Repeat("é𝄞x", 20000) // past one chunk, with surrogates
	for _, c := range []struct{ typ, in, want string }{
		{"java.lang.String", `"plain"`, `"plain"`},
		{"java.lang.String", `"a\"b\\c\n\u00e9\ud834\udd1e"`, `"a\"b\\c\n` + "é𝄞" + `"`},
		{"java.lang.String", `"` + long + `"`, `"` + long + `"`},
		{"int", `-17`, `-17`},
		{"int", `262144`, `262144`},
		{"long", `9007199254740993`, `9007199254740993`},
		{"long", `-3000`, `-3000`},
		{"double", `2.5`, `2.5`},
		{"double", `3`, `3`},
		{"double", `-1e300`, `-1e+300`},
		{"boolean", `true`, `true`},
		{"java.lang.Long", `null`, `null`},
		{"java.util.Map", `{"a":[1,2.5,"x",null,{"b":false}],"n":-100000,"big":8589934592}`,
			`{"a":[1,2.5,"x",null,{"b":false}],"n":-100000,"big":8589934592}`},
		{"com.shop.OrderQuery", `{"customer":"c1","class":"evil.Gadget","limit":3}`,
			`{"class":"com.shop.OrderQuery","customer":"c1","limit":3}`},
		{"java.util.List", `[]`, `[]`},
	} {
		if got := roundTrip(t, c.typ, c.in); got != c.want {
			t.Errorf("%s %.60s: got %.80s, want %.80s", c.typ, c.in, got, c.want)
		}
	}
}

func TestJSONRefusedValues(t *testing.T) {
	deep := strings.Repeat("[", MaxJSONDepth+2) + strings.Repeat("]", MaxJSONDepth+2)
	for _, c := range []struct{ typ, in string }{
		{"int", `"12"`}, {"int", `2147483648`}, {"long", `1.5`}, {"boolean", `1`}, {"java.lang.String", `12`},
		{"int", `null`}, {"java.util.Map", `{"a":}`}, {"java.util.Map", `{"a":1} x`}, {"java.util.List", deep},
		{"java.util.Map", `{"a":"\x01"}`}, {"java.util.List", `[1,2`},
	} {
		p, _ := NewParam(c.typ)
		if _, err := p.AppendJSON(nil, []byte(c.in)); !errors.Is(err, ErrBadValue) {
			t.Errorf("%s %.40s: got %v, want a bad value", c.typ, c.in, err)
		}
	}
	if _, err := NewParam("com.shop;Evil"); err == nil {
		t.Error("a type with a semicolon was accepted")
	}
}

// Hostile answers: each must end in an error, quickly and without
// holding much memory, never in a crash.
func TestDecoderBounds(t *testing.T) {
	deep := append(bytes.Repeat([]byte{0x57}, MaxDepth+1), bytes.Repeat([]byte{'Z'}, MaxDepth+1)...)
	cyclic := []byte{'H', 0x01, 'a', 'Q', 0x90, 'Z'}                               // {"a": <itself>}
	hugeList := []byte{0x58, 'I', 0x7f, 0xff, 0xff, 0xff, 0x91}                    // claims 2^31-1 elements, holds one
	badRef := []byte{'Q', 0x95}                                                    // refers to nothing
	manyFields := []byte{'C', 0x01, 'X', 'I', 0x7f, 0xff, 0xff, 0xff}              // a class of 2^31-1 fields
	undefined := []byte{0x60}                                                      // an object of no class
	badUTF8 := []byte{0x02, 0xff, 0xfe}                                            // not UTF-8
	containerKey := []byte{'H', 0x57, 'Z', 0x91, 'Z'}                              // a list as a key
	selfRefs := []byte{0x57, 0x57, 'Z', 'Q', 0x91, 'Q', 0x91, 'Q', 0x91, 'Q', 'Z'} // cut short
	for name, in := range map[string][]byte{"deep": deep, "cyclic": cyclic, "huge list": hugeList, "bad ref": badRef,
		"many fields": manyFields, "undefined class": undefined, "bad utf8": badUTF8, "container key": containerKey,
		"truncated": selfRefs, "unknown tag": {0x40}} {
		r := newDecoder(in, nil)
		if err := r.value(); err == nil {
			t.Errorf("%s: decoded to %s", name, r.out)
		}
	}
}

// A chain of references doubling what each repeats stops at the output
// bound instead of growing exponentially.
func TestDecoderReferenceBlowUp(t *testing.T) {
	in := []byte{0x57, 0x57, 'Z'} // [ [] ...
	for i := 1; i <= 40; i++ {
		// ... [Q(i), Q(i)]: twice the list before it.
		in = append(in, 0x57, 'Q', byte(0x90+i), 'Q', byte(0x90+i), 'Z')
	}
	in = append(in, 'Z')
	r := newDecoder(in, nil)
	if err := r.value(); !errors.Is(err, errTooBig) {
		t.Fatalf("got %v after %d bytes of JSON from %d", err, len(r.out), len(in))
	}
	if len(r.out) > outputPerBody*len(in)+64 {
		t.Fatalf("wrote %d bytes before stopping", len(r.out))
	}
}

// Java objects (class definitions, instances, typed lists, dates,
// binary) read as JSON.
func TestDecoderJavaShapes(t *testing.T) {
	in := []byte{'C', 0x0e}
	in = append(in, "com.shop.Order"...)
	in = append(in, 0x93, 0x02, 'i', 'd', 0x04, 'p', 'a', 'i', 'd', 0x05, 'i', 't', 'e', 'm', 's')
	in = append(in, 0x60, 0x02, 'o', '1', 'T', 0x72, 0x07)
	in = append(in, "[string"...)
	in = append(in, 0x01, 'a', 0x01, 'b')
	r := newDecoder(in, nil)
	if err := r.value(); err != nil {
		t.Fatal(err)
	}
	if got, want := string(r.out), `{"id":"o1","paid":true,"items":["a","b"]}`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if r.topClass != "com.shop.Order" {
		t.Fatalf("class %q", r.topClass)
	}
	date := []byte{0x4a, 0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00, 0x23, 'a', 'b', 'c'}
	r = newDecoder(date, nil)
	if err := r.value(); err != nil {
		t.Fatal(err)
	}
	if err := r.value(); err != nil {
		t.Fatal(err)
	}
	var got []any
	if err := json.Unmarshal(append(append([]byte{'['}, bytes.Replace(r.out, []byte(`""`), []byte(`","`), 1)...), ']'), &got); err != nil {
		t.Fatalf("%s: %v", r.out, err)
	}
	if got[0] != "2023-11-14T22:13:20.000Z" || got[1] != "YWJj" {
		t.Fatalf("got %v", got)
	}
}

// A frame header is checked before its body is read: a length past the
// limit, a negative one, another serialization or no magic end the
// connection instead of an allocation.
func TestParseHeaderBounds(t *testing.T) {
	frame := func(flags byte, length uint32) []byte {
		h := appendHeader(nil, flags, StatusOK, 7)
		h[2] = flags
		binary.BigEndian.PutUint32(h[12:], length)
		return h
	}
	if h, err := parseHeader(frame(serialHessian2, 100), 1<<20); err != nil || h.length != 100 || h.id != 7 {
		t.Fatalf("a valid header: %+v %v", h, err)
	}
	for name, b := range map[string][]byte{
		"too long":     frame(serialHessian2, 1<<20+1),
		"negative":     frame(serialHessian2, 0x80000000),
		"other serial": frame(6, 10),
		"no magic":     append([]byte{0xca, 0xfe}, frame(serialHessian2, 1)[2:]...),
	} {
		if _, err := parseHeader(b, 1<<20); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
