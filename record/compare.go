package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// Difference is one place where an answer differs from the one it is
// compared with (the recorded one, or the primary's for a mirror).
type Difference struct {
	// Kind is "status", "header" or "body".
	Kind string `json:"kind"`
	// Where names the header, or the JSON path of a body difference
	// ("json.items.0.price"; "json" for the whole document, "" for a body
	// that is not JSON).
	Where string `json:"where,omitempty"`
	// Want and Got are the two values, as JSON text for JSON values;
	// "(absent)" for a member or element one side lacks.
	Want string `json:"want"`
	Got  string `json:"got"`
}

// Absent stands for a JSON member, array element or header one side of a
// comparison lacks.
const Absent = "(absent)"

// Ignore is a JSON path left out of body comparisons: "json.ts",
// "json.items.*.id" (* is any member or element).
type Ignore struct{ segs []string }

// ParseIgnore compiles an ignore path.
func ParseIgnore(s string) (Ignore, error) {
	rest, ok := strings.CutPrefix(s, "json.")
	if !ok || rest == "" {
		return Ignore{}, fmt.Errorf("ignore %q: want a JSON path such as json.ts or json.items.*.id", s)
	}
	segs := strings.Split(rest, ".")
	if slices.Contains(segs, "") {
		return Ignore{}, fmt.Errorf("ignore %q: empty path segment", s)
	}
	return Ignore{segs: segs}, nil
}

// ParseIgnores compiles a list of ignore paths.
func ParseIgnores(list []string) ([]Ignore, error) {
	out := make([]Ignore, 0, len(list))
	for _, s := range list {
		ig, err := ParseIgnore(s)
		if err != nil {
			return nil, err
		}
		out = append(out, ig)
	}
	return out, nil
}

func (ig Ignore) matches(path []string) bool {
	if len(path) != len(ig.segs) {
		return false
	}
	for i, s := range ig.segs {
		if s != "*" && s != path[i] {
			return false
		}
	}
	return true
}

// maxExcerpt bounds the text of a value in a Difference.
const maxExcerpt = 200

// CompareBodies compares the body got with want: structurally when both
// are JSON (member order and number spelling aside; a "***" string in
// want, a masked value, matches anything), byte for byte otherwise. It
// returns at most limit differences, in path order.
func CompareBodies(want, got []byte, ignore []Ignore, limit int) []Difference {
	wv, werr := decodeJSON(want)
	gv, gerr := decodeJSON(got)
	if werr != nil || gerr != nil {
		if bytes.Equal(want, got) {
			return nil
		}
		return []Difference{{Kind: "body", Want: excerpt(string(want)), Got: excerpt(string(got))}}
	}
	c := comparer{ignore: ignore, limit: limit}
	c.value(nil, wv, gv)
	return c.out
}

func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return v, nil
}

type comparer struct {
	ignore []Ignore
	limit  int
	out    []Difference
}

func (c *comparer) value(path []string, want, got any) {
	if len(c.out) >= c.limit {
		return
	}
	for _, ig := range c.ignore {
		if ig.matches(path) {
			return
		}
	}
	if s, ok := want.(string); ok && s == Masked {
		return
	}
	switch w := want.(type) {
	case map[string]any:
		if g, ok := got.(map[string]any); ok {
			keys := make([]string, 0, len(w)+len(g))
			for k := range w {
				keys = append(keys, k)
			}
			for k := range g {
				if _, dup := w[k]; !dup {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			for _, k := range keys {
				c.member(append(path, k), w, g, k)
			}
			return
		}
	case []any:
		if g, ok := got.([]any); ok {
			for i := range max(len(w), len(g)) {
				p := append(path, strconv.Itoa(i))
				switch {
				case i >= len(g):
					c.add(p, w[i], absentValue{})
				case i >= len(w):
					c.add(p, absentValue{}, g[i])
				default:
					c.value(p, w[i], g[i])
				}
			}
			return
		}
	case json.Number:
		if g, ok := got.(json.Number); ok && sameNumber(w, g) {
			return
		}
	default:
		if scalarEqual(want, got) {
			return
		}
	}
	c.add(path, want, got)
}

func (c *comparer) member(path []string, w, g map[string]any, k string) {
	wv, inW := w[k]
	gv, inG := g[k]
	switch {
	case inW && inG:
		c.value(path, wv, gv)
	case inW:
		c.add(path, wv, absentValue{})
	default:
		c.add(path, absentValue{}, gv)
	}
}

// absentValue stands for the side of a comparison that lacks a member or
// element (a JSON null is a value: nil).
type absentValue struct{}

// add records a difference at path.
func (c *comparer) add(path []string, want, got any) {
	if len(c.out) >= c.limit {
		return
	}
	for _, ig := range c.ignore {
		if ig.matches(path) {
			return
		}
	}
	d := Difference{Kind: "body", Where: "json", Want: jsonText(want), Got: jsonText(got)}
	if len(path) > 0 {
		d.Where = "json." + strings.Join(path, ".")
	}
	c.out = append(c.out, d)
}

func sameNumber(a, b json.Number) bool {
	if a == b {
		return true
	}
	x, okx := new(big.Float).SetString(string(a))
	y, oky := new(big.Float).SetString(string(b))
	return okx && oky && x.Cmp(y) == 0
}

func scalarEqual(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	}
	return false
}

func jsonText(v any) string {
	if _, ok := v.(absentValue); ok {
		return Absent
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return excerpt(string(b))
}

func excerpt(s string) string {
	if len(s) <= maxExcerpt {
		return s
	}
	return s[:maxExcerpt] + "…"
}
