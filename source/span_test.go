package source

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/secretname"
	"github.com/tollgate/tollgate/internal/testutil"
)

// exactNames is the set of names, each matched whole (nil for none).
func exactNames(names ...string) *secretname.Set {
	if len(names) == 0 {
		return nil
	}
	return secretname.New(nil, names)
}

func paths(t *testing.T, texts ...string) [][]Segment {
	t.Helper()
	var out [][]Segment
	for _, s := range texts {
		src, err := Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, src.Path)
	}
	return out
}

func TestJSONSpans(t *testing.T) {
	for _, tc := range []struct {
		name  string
		doc   string
		paths []string
		names []string
		want  []string // the designated values' text, in document order
		whole bool
		cut   bool
	}{
		{"path", `{"card":{"number":"4111","cvv":1},"n":2}`, []string{"json.card.number"}, nil, []string{`"4111"`}, true, false},
		{"every repeat", `{"card":{"number":"1"},"card":{"number":"2"}}`, []string{"json.card.number"}, nil, []string{`"1"`, `"2"`}, true, false},
		{"array index", `{"items":[{"id":1},{"id":2}]}`, []string{"json.items.1.id"}, nil, []string{`2`}, true, false},
		{"container whole", `{"card":{"number":"1"}}`, []string{"json.card", "json.card.number"}, nil, []string{`{"number":"1"}`}, true, false},
		{"names at any depth", `{"password":"a","u":{"password":["x"]},"l":[{"password":1}]}`, nil, []string{"password"}, []string{`"a"`, `["x"]`, `1`}, true, false},
		{"escaped key", `{"pass\u0077ord":"a"}`, nil, []string{"password"}, []string{`"a"`}, true, false},
		{"names without case", `{"Password":"a","PASS\u0057ORD":"b","passwords":"c"}`, nil, []string{"password"}, []string{`"a"`, `"b"`}, true, false},
		{"paths with case", `{"Card":{"number":"1"}}`, []string{"json.card.number"}, nil, nil, true, false},
		{"none", `{"a":1}`, []string{"json.b"}, []string{"c"}, nil, true, false},
		{"invalid after", `{"password":"a",}`, nil, []string{"password"}, []string{`"a"`}, false, false},
		{"invalid before", `{,"password":"a"}`, nil, []string{"password"}, nil, false, false},
		{"ends early", `{"password":"a","b":`, nil, []string{"password"}, []string{`"a"`}, false, false},
		{"trailing bytes", `{"a":1} x`, nil, []string{"a"}, []string{`1`}, false, false},
		{"bare number", `42`, nil, []string{"a"}, nil, true, false},
		{"bare number cut", `4.`, nil, []string{"a"}, nil, false, false},
		{"bare string", ` "s" `, nil, []string{"a"}, nil, true, false},
		{"empty", ``, nil, []string{"a"}, nil, false, false},
		{"cut inside a value", `{"n":1,"password":"hunte`, nil, []string{"password"}, []string{`"hunte`}, true, true},
		{"cut inside a container", `{"card":{"number":"41","x":[1,`, []string{"json.card"}, nil, []string{`{"number":"41","x":[1,`}, true, true},
		{"cut before the value", `{"password":`, nil, []string{"password"}, nil, true, true},
		{"cut, then invalid", `{"a":,"password":"x`, nil, []string{"password"}, nil, false, true},
		{"cut whole", `{"password":"x"}`, nil, []string{"password"}, []string{`"x"`}, true, true},
		{"names by meaning", `{"newPassword":"a","x":{"client_secret":"b","Api-Key":"c"},"keyword":"d","apiKey":"e","pinned":1}`,
			nil, []string{"*"}, []string{`"a"`, `"b"`, `"c"`, `"e"`}, true, false},
		{"escaped name by meaning", `{"access\u0054oken":"a"}`, nil, []string{"*"}, []string{`"a"`}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names := exactNames(tc.names...)
			if len(tc.names) == 1 && tc.names[0] == "*" {
				names = secretname.Default
			}
			spans, whole := JSONSpans(nil, []byte(tc.doc), tc.cut, paths(t, tc.paths...), names)
			var got []string
			for _, s := range spans {
				got = append(got, tc.doc[s[0]:s[1]])
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || whole != tc.whole {
				t.Fatalf("got %q whole=%v, want %q whole=%v", got, whole, tc.want, tc.whole)
			}
		})
	}
}

func TestParamNameIs(t *testing.T) {
	for enc, want := range map[string]bool{"card_no": true, "card%5Fno": true, "card+no": false, "card_n": false, "card_no2": false} {
		if ParamNameIs([]byte(enc), "card_no") != want {
			t.Errorf("%q: want %v", enc, want)
		}
	}
	if !ParamNameIs([]byte("a+b"), "a b") {
		t.Error("'+' must decode to a space")
	}
}

func TestJSONSpansAllocs(t *testing.T) {
	if testutil.Race {
		t.Skip("the race detector allocates")
	}
	doc := []byte(`{"card":{"number":"4111111111111111","cvv":"123"},"items":[{"id":1,"password":"x"}],"pass\u0077ord":"p"}`)
	ps := paths(t, "json.card.number", "json.card.cvv")
	names := secretname.Default
	dst := make([][2]int, 0, 8)
	n := testing.AllocsPerRun(200, func() {
		var whole bool
		dst, whole = JSONSpans(dst[:0], doc, false, ps, names)
		if !whole || len(dst) != 4 {
			t.Fatalf("spans %v whole %v", dst, whole)
		}
	})
	if n != 0 {
		t.Fatalf("%.1f allocations per call", n)
	}
}

// FuzzJSONSpans checks that JSONSpans calls a document whole exactly when
// encoding/json finds it valid, and that every span it reports is itself
// one JSON value inside the document, the spans in order and apart.
func FuzzJSONSpans(f *testing.F) {
	f.Add([]byte(`{"a":{"b":"x"},"password":[1,{"a":2}],"l":[{"b":3}]}`))
	f.Add([]byte(`[{"a":1},{"password":"p"}]`))
	f.Add([]byte(`-0.5e+3`))
	ps := [][]Segment{{{Key: "a", Index: -1}, {Key: "b", Index: -1}}, {{Key: "1", Index: 1}}}
	f.Fuzz(func(t *testing.T, doc []byte) {
		spans, whole := JSONSpans(nil, doc, false, ps, exactNames("password", "b"))
		deep := bytes.Count(doc, []byte("["))+bytes.Count(doc, []byte("{")) >= maxJSONNesting
		if valid := json.Valid(doc); whole != valid && !deep {
			t.Fatalf("%q: whole %v, encoding/json %v", doc, whole, valid)
		}
		last := 0
		for _, s := range spans {
			if s[0] < last || s[1] <= s[0] || s[1] > len(doc) || !json.Valid(doc[s[0]:s[1]]) {
				t.Fatalf("%q: bad span %v after %d", doc, s, last)
			}
			last = s[1]
		}
		// The start of a valid document, cut anywhere, reads whole, and
		// its spans are those of the document that start before the cut,
		// the last one perhaps cut short.
		if !whole || deep {
			return
		}
		k := len(doc) / 2
		cut, ok := JSONSpans(nil, doc[:k], true, ps, exactNames("password", "b"))
		starts := 0
		for _, s := range spans {
			if s[0] < k {
				starts++
			}
		}
		if !ok || len(cut) != starts {
			t.Fatalf("%q cut at %d: whole %v, spans %v of %v", doc, k, ok, cut, spans)
		}
		for i, s := range cut {
			if s[0] != spans[i][0] || s[1] != spans[i][1] && s[1] != k {
				t.Fatalf("%q cut at %d: span %v, whole %v", doc, k, s, spans[i])
			}
		}
	})
}
