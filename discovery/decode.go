package discovery

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/tollgate/tollgate/pipeline"
	"gopkg.in/yaml.v3"
)

// Decoder returns the decode function a Factory or Target gets for the
// mapping n: it decodes n into the provider's type and refuses, with its
// line, a key the type does not have (at any depth of nested mappings),
// so that a misspelt setting is an error and not silently ignored. skip
// names keys this package reads itself (discover's from, name, …).
func Decoder(n *yaml.Node, skip ...string) func(into any) error {
	return func(into any) error {
		if n == nil || n.Kind == 0 {
			return nil
		}
		if err := checkKeys(n, reflect.TypeOf(into), skip); err != nil {
			return err
		}
		if err := n.Decode(into); err != nil {
			return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n  "))
		}
		return nil
	}
}

// checkKeys walks the mapping n against the struct type t.
func checkKeys(n *yaml.Node, t reflect.Type, skip []string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode || t.Kind() != reflect.Struct {
		return nil
	}
	if _, custom := reflect.PointerTo(t).MethodByName("UnmarshalYAML"); custom {
		return nil // the type reads its own keys
	}
	fields := map[string]reflect.Type{}
	collectFields(t, fields)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if slices.Contains(skip, k.Value) {
			continue
		}
		ft, ok := fields[k.Value]
		if !ok {
			return fmt.Errorf("line %d: unknown setting %q%s (known: %s)", k.Line, k.Value, pipeline.DidYouMean(k.Value, sortedKeys(fields)), strings.Join(sortedKeys(fields), ", "))
		}
		if err := checkKeys(v, ft, nil); err != nil {
			return err
		}
	}
	return nil
}

// collectFields maps the yaml names of t's fields (inlined structs
// flattened) to their types.
func collectFields(t reflect.Type, into map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := strings.Split(f.Tag.Get("yaml"), ",")
		name := tag[0]
		if len(tag) > 1 && tag[1] == "inline" && f.Type.Kind() == reflect.Struct {
			collectFields(f.Type, into)
			continue
		}
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		into[name] = f.Type
	}
}

func sortedKeys(m map[string]reflect.Type) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
