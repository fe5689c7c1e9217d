package config

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/tollgate/tollgate/pipeline"
	"gopkg.in/yaml.v3"
)

// yaml.v3 words a value of the wrong kind after the Go type it was to
// become ("cannot unmarshal !!str `two` into float64"); operators know the
// configuration, not its Go types, so each such message is said again in
// the configuration's own words ("expected a number, got \"two\"").

var typeErrorText = regexp.MustCompile("^line (\\d+): cannot unmarshal (!![a-z]+)(?: `(.*)`)? into (.+)$")

// typeProblem turns one of yaml's type error lines into an Error at the
// value it is about, found under n.
func typeProblem(n *yaml.Node, msg string) *Error {
	m := typeErrorText.FindStringSubmatch(msg)
	if m == nil {
		line, rest := 0, msg
		if lm := yamlLine.FindStringSubmatch(msg); lm != nil {
			line, _ = strconv.Atoi(lm[1])
			rest = lm[2]
		}
		return &Error{Line: line, Msg: rest}
	}
	line, _ := strconv.Atoi(m[1])
	tag, shown, goType := m[2], m[3], m[4]
	at := findValue(n, line, tag, strings.TrimSuffix(shown, "..."))
	e := &Error{Line: line, Msg: fmt.Sprintf("expected %s, got %s", expectedWords(goType), gotWords(tag, shown, at))}
	if at != nil {
		e.Col = at.Column
	}
	return e
}

// findValue finds under n the value on line whose tag is tag and whose
// text starts with prefix (yaml cuts long values short in its messages):
// the innermost such value, as a mapping that starts on the line holds
// the values written on it.
func findValue(n *yaml.Node, line int, tag, prefix string) *yaml.Node {
	var walk func(x *yaml.Node, depth int) *yaml.Node
	walk = func(x *yaml.Node, depth int) *yaml.Node {
		if x == nil || depth > maxDepth || x.Line > line {
			return nil
		}
		for _, c := range x.Content {
			if found := walk(c, depth+1); found != nil {
				return found
			}
		}
		if x.Line == line && x.ShortTag() == tag && strings.HasPrefix(x.Value, prefix) {
			return x
		}
		return nil
	}
	return walk(n, 0)
}

// maxQuoted bounds how much of a value a message repeats.
const maxQuoted = 40

// gotWords says what the file holds where a value was refused.
func gotWords(tag, shown string, at *yaml.Node) string {
	switch tag {
	case "!!map":
		return "a mapping"
	case "!!seq":
		return "a list"
	case "!!null":
		return "nothing"
	case "!!binary":
		return "binary data"
	}
	v := shown
	if at != nil {
		v = at.Value
	}
	if len(v) > maxQuoted {
		v = v[:maxQuoted] + "…"
	}
	if tag == "!!str" {
		return strconv.Quote(unmarkRefs(v))
	}
	return unmarkRefs(v)
}

// expectedWords says what a value of the Go type named goType is written
// as: the type is found among those the configuration decodes into.
func expectedWords(goType string) string {
	if t, ok := configTypes()[goType]; ok {
		return article(t)
	}
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["):
		return "a mapping"
	}
	return "a value of another kind"
}

// article is a value of type t, with its article.
func article(t reflect.Type) string {
	one, _ := valueWords(t)
	return one
}

// plural is several values of type t.
func plural(t reflect.Type) string {
	_, many := valueWords(t)
	return many
}

// valueWords names a value of type t with its article, and several.
func valueWords(t reflect.Type) (one, many string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number", "whole numbers"
	case reflect.Float32, reflect.Float64:
		return "a number", "numbers"
	case reflect.Bool:
		return "true or false", "true or false values"
	case reflect.String:
		return "a string", "strings"
	case reflect.Slice, reflect.Array:
		of := plural(t.Elem())
		return "a list of " + of, "lists of " + of
	case reflect.Map:
		of := plural(t.Elem())
		return "a map of " + of, "maps of " + of
	case reflect.Struct:
		w := typeWords(t.Name())
		return structArticle(w), structPlural(w)
	}
	return "a value", "values"
}

func structArticle(w string) string {
	switch {
	case strings.HasSuffix(w, "settings"):
		return "a mapping of " + w
	case strings.ContainsRune("aeiou", rune(w[0])):
		return "an " + w
	}
	return "a " + w
}

func structPlural(w string) string {
	switch {
	case strings.HasSuffix(w, "settings"), strings.HasSuffix(w, "s"), strings.HasSuffix(w, "x"):
		return w
	case strings.HasSuffix(w, "y") && !strings.HasSuffix(w, "ey"):
		return w[:len(w)-1] + "ies"
	}
	return w + "s"
}

// typeWords writes a Go type's name as words: WebSocketConfig is
// "web socket settings", Instance "instance".
func typeWords(name string) string {
	if name == "" {
		return "mapping"
	}
	var words []string
	start := 0
	rs := []rune(name)
	for i := 1; i < len(rs); i++ {
		if unicode.IsUpper(rs[i]) && (unicode.IsLower(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
			words = append(words, strings.ToLower(string(rs[start:i])))
			start = i
		}
	}
	words = append(words, strings.ToLower(string(rs[start:])))
	if last := words[len(words)-1]; len(words) > 1 && (last == "entry" || last == "spec") {
		words = words[:len(words)-1] // InstanceEntry is an instance as written
	}
	if last := words[len(words)-1]; last == "config" || last == "settings" || last == "conf" {
		words[len(words)-1] = "settings"
		if len(words) == 1 {
			return "mapping of settings"
		}
	}
	return strings.Join(words, " ")
}

// configTypes indexes by Go name (as yaml prints it) every type the
// configuration decodes into: the file's schema, the registered sections'
// and features' types and their plug-ins'.
var configTypes = sync.OnceValue(func() map[string]reflect.Type {
	idx := map[string]reflect.Type{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		if _, seen := idx[t.String()]; seen {
			return
		}
		idx[t.String()] = t
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			walk(t.Elem())
		case reflect.Struct:
			for i := 0; i < t.NumField(); i++ {
				if f := t.Field(i); f.IsExported() {
					walk(f.Type)
				}
			}
		}
	}
	walk(reflect.TypeOf(File{}))
	for _, s := range pipeline.Sections() {
		walk(reflect.TypeOf(s.Config()))
		if s.Entries != nil {
			for _, v := range s.Entries() {
				walk(reflect.TypeOf(v))
			}
		}
	}
	for _, f := range pipeline.Features() {
		walk(reflect.TypeOf(f.Config()))
	}
	return idx
})
