package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"

	"github.com/tollgate/tollgate/pipeline"
	"gopkg.in/yaml.v3"
)

// Error is a configuration problem at a place in the file.
type Error struct {
	File string
	Line int
	Col  int
	Msg  string
}

func (e *Error) Error() string {
	switch {
	case e.Line > 0 && e.Col > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// lineError is raised while decoding and given its file name by Parse.
type lineError struct {
	line, col int
	msg       string
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

// envRef is a reference: ${NAME}, ${NAME:-default} (the default when
// NAME is not set), or either escaped as $${…}, which stays as written
// less one "$".
var envRef = regexp.MustCompile(`\$(\$?)\{([A-Za-z_][A-Za-z0-9_]*(?::-[^}\n]*)?)\}`)

// notYet lists configuration sections of the product that this build does
// not enforce. Refusing them is safer than ignoring them: a route that asks
// for signatures must never be served without them.
var notYet = map[string]bool{
	"public": true,
}

// Parse parses a node's own configuration file. name is used in error
// messages; lookup resolves ${NAME} references, in any value (see
// expand.go); a variable lookup does not have is an error.
func Parse(name string, data []byte, lookup func(string) (string, bool)) (*File, error) {
	return ParseAs(name, data, lookup, Lenient)
}

// ParseDocument parses a configuration read from Redis: ${NAME} expands
// in secret fields only, and anywhere else is an error.
func ParseDocument(name string, data []byte, lookup func(string) (string, bool)) (*File, error) {
	return ParseAs(name, data, lookup, Strict)
}

// ParseAs parses a config document, expanding references as mode says.
// No error it returns carries a value taken from the environment.
func ParseAs(name string, data []byte, lookup func(string) (string, bool), mode Expansion) (*File, error) {
	if i := bytes.IndexAny(data, string([]rune{refOpen, refClose})); i >= 0 {
		return nil, &Error{File: name, Line: 1 + bytes.Count(data[:i], []byte("\n")),
			Msg: "the configuration holds a private-use character (U+E000 or U+E001); remove it"}
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(markRefs(data)))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: name, Msg: "empty configuration"}
		}
		return nil, unmarkErr(yamlError(name, err))
	}
	if len(root.Content) == 0 {
		return nil, &Error{File: name, Msg: "empty configuration"}
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		return nil, &Error{File: name, Line: doc.Line, Col: doc.Column, Msg: "the configuration must be a mapping of settings"}
	}
	errs := &problems{name: name}
	checkFields(errs, doc, reflect.TypeOf(File{}), "")
	values := expandRefs(errs, doc, mode, lookup)
	f := &File{expanded: values}
	if err := doc.Decode(f); err != nil {
		errs.addDecode(doc, err)
	}
	f.checkOwnedValues(errs)
	if err := errs.err(); err != nil {
		return nil, redactErr(unmarkErr(err), values)
	}
	f.noteTransport(doc)
	f.topKeys = writtenKeys(doc)
	f.doc = doc
	if v := mapValue(doc, "config"); v != nil {
		f.configLine = v.Line
	}
	return f, nil
}

// writtenKeys lists the keys of the mapping n, those a merge ("<<: *x")
// brings in included.
func writtenKeys(n *yaml.Node) map[string]bool {
	set := map[string]bool{}
	var add func(m *yaml.Node, depth int)
	add = func(m *yaml.Node, depth int) {
		for m.Kind == yaml.AliasNode && m.Alias != nil {
			m = m.Alias
		}
		if depth > 8 {
			return
		}
		switch m.Kind {
		case yaml.SequenceNode:
			for _, c := range m.Content {
				add(c, depth+1)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(m.Content); i += 2 {
				if k := m.Content[i]; k.Tag == "!!merge" || k.Value == "<<" && k.Style == 0 {
					add(m.Content[i+1], depth+1)
				} else {
					set[k.Value] = true
				}
			}
		}
	}
	add(n, 0)
	return set
}

// unmarkErr writes references in a message as the document wrote them.
func unmarkErr(err error) error {
	if all, ok := err.(*Errors); ok {
		for _, e := range all.List {
			unmarkErr(e)
		}
		return all
	}
	var ce *Error
	if errors.As(err, &ce) {
		ce.File, ce.Msg = unmarkRefs(ce.File), unmarkRefs(ce.Msg)
		return ce
	}
	if s := err.Error(); strings.ContainsRune(s, refOpen) {
		return errors.New(unmarkRefs(s))
	}
	return err
}

var yamlLine = regexp.MustCompile(`line (\d+): (.*)`)

// yamlError turns yaml.v3's messages ("yaml: line 4: ...") into Errors.
func yamlError(name string, err error) error {
	var le *lineError
	if errors.As(err, &le) {
		return &Error{File: name, Line: le.line, Col: le.col, Msg: le.msg}
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n  ")
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		var line int
		fmt.Sscanf(m[1], "%d", &line)
		return &Error{File: name, Line: line, Msg: m[2]}
	}
	return &Error{File: name, Msg: msg}
}

// checkFields walks the document against the schema and reports every key
// the schema does not have, at the key's line and column: a typo such as
// "priorty" must not silently mean "priority 0".
func checkFields(errs *problems, n *yaml.Node, t reflect.Type, path string) {
	checkFieldsAt(errs, n, t, path, 0)
}

// maxDepth bounds the walk: the schema is not that deep, a document that
// is (aliases of aliases) says nothing more past it.
const maxDepth = 64

func checkFieldsAt(errs *problems, n *yaml.Node, t reflect.Type, path string, depth int) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if depth > maxDepth || reflect.PointerTo(t).Implements(ownKeysType) {
		return // the type's owner refuses the keys it does not know, with their line
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return // a scalar type (Duration) or a mismatch Decode reports with its line
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			ft, ok := fieldByTag(t, k.Value)
			where := path + k.Value
			if !ok && hasInline(t) {
				// A registered feature's setting or section, or a
				// section's plug-in (a discovery provider): checked
				// against its owner's own config type.
				ft, ok = ownedType(t, k.Value)
			}
			if !ok {
				if k.Tag == "!!merge" {
					checkMerged(errs, v, t, path, depth+1)
					continue
				}
				if notYet[k.Value] {
					errs.add(&Error{Line: k.Line, Col: k.Column,
						Msg: fmt.Sprintf("%q is not supported by this version of tollgate; remove it rather than run without it", where)})
					continue
				}
				errs.add(&Error{Line: k.Line, Col: k.Column,
					Msg: fmt.Sprintf("unknown setting %q", where) + pipeline.DidYouMean(k.Value, knownKeys(t))})
				continue
			}
			checkFieldsAt(errs, v, ft, where+".", depth+1)
		}
	case reflect.Map:
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				checkFieldsAt(errs, n.Content[i+1], t.Elem(), path+n.Content[i].Value+".", depth+1)
			}
		}
	case reflect.Slice:
		if n.Kind == yaml.SequenceNode {
			for i, item := range n.Content {
				checkFieldsAt(errs, item, t.Elem(), fmt.Sprintf("%s[%d].", strings.TrimSuffix(path, "."), i), depth+1)
			}
		}
	}
}

// checkMerged checks the keys a merge ("<<: *base" or a list of them)
// brings into a mapping of type t as if written there.
func checkMerged(errs *problems, v *yaml.Node, t reflect.Type, path string, depth int) {
	for v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias
	}
	if v.Kind == yaml.SequenceNode {
		for _, item := range v.Content {
			checkFieldsAt(errs, item, t, path, depth+1)
		}
		return
	}
	checkFieldsAt(errs, v, t, path, depth)
}

// ownKeysType is the mark of a setting whose keys are known only to
// the package its value is handed to (a service's discover, read by its
// provider).
var ownKeysType = reflect.TypeOf((*interface{ KeysCheckedByOwner() })(nil)).Elem()

// collectsFeatures reports whether t's unknown keys are feature settings
// (the file's and a route's): other types with an inline mapping are a
// section's, whose owner knows the keys.
func collectsFeatures(t reflect.Type) bool {
	return t == reflect.TypeOf(File{}) || t == reflect.TypeOf(Route{})
}

// hasInline reports whether t collects unknown keys (feature settings).
func hasInline(t reflect.Type) bool {
	for i := 0; i < t.NumField(); i++ {
		if strings.Contains(t.Field(i).Tag.Get("yaml"), ",inline") {
			return true
		}
	}
	return false
}

// ownedType returns the config type of key where it is written on a
// struct of type t that collects its unknown keys: a registered feature's
// setting (route or top level), or a top-level section's.
func ownedType(t reflect.Type, key string) (reflect.Type, bool) {
	if !collectsFeatures(t) {
		return entryType(t, key)
	}
	if f, found := pipeline.Lookup(key); found && f.Scope&scopeOf(t) != 0 {
		return reflect.TypeOf(f.Config()), true
	}
	if s, found := pipeline.LookupSection(key); found && scopeOf(t) == pipeline.ScopeGlobal {
		return reflect.TypeOf(s.Config()), true
	}
	return nil, false
}

// entryType returns the type of the entry key of the section whose config
// type is t (pipeline.Section.Entries).
func entryType(t reflect.Type, key string) (reflect.Type, bool) {
	for _, s := range pipeline.Sections() {
		if s.Entries == nil || reflect.TypeOf(s.Config()).Elem() != t {
			continue
		}
		if v, ok := s.Entries()[key]; ok {
			return reflect.TypeOf(v), true
		}
	}
	return nil, false
}

// scopeOf says where features set on a struct of type t apply.
func scopeOf(t reflect.Type) pipeline.Scope {
	if t == reflect.TypeOf(File{}) {
		return pipeline.ScopeGlobal
	}
	return pipeline.ScopeRoute
}

func fieldByTag(t reflect.Type, key string) (reflect.Type, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if tag == key && tag != "-" && tag != "" {
			return f.Type, true
		}
	}
	return nil, false
}
