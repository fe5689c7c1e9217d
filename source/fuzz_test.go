package source

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

// FuzzScan checks the JSON scanner against encoding/json and the form
// scanner against fasthttp's own urlencoded parser, on arbitrary bodies.
func FuzzScan(f *testing.F) {
	f.Add([]byte(`{"a":{"b":"x\u00e9"},"items":[{"id":1},{"id":"\ud83d\ude00"}],"0":null}`))
	f.Add([]byte(`[{"a":1},[2]]`))
	f.Add([]byte(`{"a":1,"a":{"b":[1,2,{"c":"\"d\""}]}}`))
	f.Add([]byte(`a=1&a=2&b=%zz&c+d=e+f&&=&g`))
	paths := [][]Segment{
		{{Key: "a", Index: -1}},
		{{Key: "a", Index: -1}, {Key: "b", Index: -1}},
		{{Key: "0", Index: 0}},
		{{Key: "a", Index: -1}, {Key: "1", Index: 1}},
		{{Key: "items", Index: -1}, {Key: "1", Index: 1}, {Key: "id", Index: -1}},
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		st := Reader{c: &pipeline.Ctx{}, body: bodyJSON, data: body}
		if len(body) > MaxJSONScan {
			st.data, st.cut = body[:MaxJSONScan], true
		}
		for _, path := range paths {
			checkJSON(t, &st, body, path)
		}

		st = Reader{c: &pipeline.Ctx{}, body: bodyForm, data: body}
		var args fasthttp.Args
		args.ParseBytes(body)
		for _, name := range []string{"a", "b", "c d", ""} {
			got, kind := st.form(name)
			want := args.Peek(name)
			has := args.Has(name)
			if name == "" {
				continue // fasthttp and this scanner differ on keyless pairs; names are never empty
			}
			if (kind != Absent) != has || kind != Absent && string(got) != string(want) {
				t.Fatalf("form.%s in %q: got %q (%v), fasthttp %q (%v)", name, body, got, kind, want, has)
			}
		}
	})
}

// checkJSON compares the scanner's answer for path with encoding/json's, on
// documents where both apply: inside the window, valid UTF-8 (encoding/json
// rewrites invalid bytes), not nested past the scanner's limit.
func checkJSON(t *testing.T, st *Reader, body []byte, path []Segment) {
	got, kind := st.json(path)
	if len(body) > MaxJSONScan || !utf8.Valid(body) ||
		bytes.Count(body, []byte("["))+bytes.Count(body, []byte("{")) >= maxJSONNesting {
		return
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if !json.Valid(body) || dec.Decode(&doc) != nil {
		if kind != Absent {
			t.Fatalf("%v in invalid %q: got %q", path, body, got)
		}
		return
	}
	v, ok := doc, true
	for _, sg := range path {
		switch x := v.(type) {
		case map[string]any:
			v, ok = x[sg.Key]
		case []any:
			ok = sg.Index >= 0 && sg.Index < len(x)
			if ok {
				v = x[sg.Index]
			}
		default:
			ok = false
		}
		if !ok {
			break
		}
	}
	var want string
	wantKind := Scalar
	switch x := v.(type) {
	case string:
		want = x
	case json.Number:
		want = string(x)
	case bool:
		want = "false"
		if x {
			want = "true"
		}
	case nil:
		want = "null"
	default:
		wantKind = Container
	}
	if !ok {
		wantKind = Absent
	}
	if kind != wantKind || kind == Scalar && string(got) != want {
		t.Fatalf("%v in %q: got %q (%v), encoding/json %q (%v)", path, body, got, kind, want, wantKind)
	}
}
