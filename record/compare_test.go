package record

import (
	"strings"
	"testing"
)

func TestCompareBodies(t *testing.T) {
	for _, tc := range []struct {
		name, want, got string
		ignore          []string
		diffs           []string // "where want got"
	}{
		{"same text", "ok", "ok", nil, nil},
		{"text", "ok", "ko", nil, []string{" ok ko"}},
		{"json order and spacing", `{"a":1,"b":[1,2]}`, `{ "b":[1,2], "a":1.0 }`, nil, nil},
		{"json field", `{"a":1,"b":{"c":"x"}}`, `{"a":1,"b":{"c":"y"}}`, nil, []string{`json.b.c "x" "y"`}},
		{"missing and extra", `{"a":1,"b":2}`, `{"a":1,"c":3}`, nil, []string{`json.b 2 (absent)`, `json.c (absent) 3`}},
		{"null is a value", `{"a":null}`, `{}`, nil, []string{`json.a null (absent)`}},
		{"array length", `[1,2,3]`, `[1,2]`, nil, []string{`json.2 3 (absent)`}},
		{"type", `{"a":"1"}`, `{"a":1}`, nil, []string{`json.a "1" 1`}},
		{"ignored", `{"ts":1,"items":[{"id":1,"n":"a"}]}`, `{"ts":2,"items":[{"id":9,"n":"a"}]}`, []string{"json.ts", "json.items.*.id"}, nil},
		{"masked matches anything", `{"card":"***","n":1}`, `{"card":{"x":1},"n":1}`, nil, nil},
		{"json against text", `{"a":1}`, `oops`, nil, []string{` {"a":1} oops`}},
		{"whole document", `1`, `2`, nil, []string{`json 1 2`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ig, err := ParseIgnores(tc.ignore)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range CompareBodies([]byte(tc.want), []byte(tc.got), ig, 10) {
				if d.Kind != "body" {
					t.Fatalf("kind %q", d.Kind)
				}
				got = append(got, d.Where+" "+d.Want+" "+d.Got)
			}
			if strings.Join(got, "|") != strings.Join(tc.diffs, "|") {
				t.Fatalf("got %q, want %q", got, tc.diffs)
			}
		})
	}
	if n := len(CompareBodies([]byte(`[1,2,3,4]`), []byte(`[5,6,7,8]`), nil, 2)); n != 2 {
		t.Fatalf("limit 2: %d differences", n)
	}
	for _, bad := range []string{"ts", "json.", "json.a..b", "header.X"} {
		if _, err := ParseIgnore(bad); err == nil {
			t.Errorf("ignore %q accepted", bad)
		}
	}
}
