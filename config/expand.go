package config

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/tollgate/tollgate/pipeline"
	"gopkg.in/yaml.v3"
)

// ${NAME} references are expanded in the parsed document, value by value,
// never in its text: a value from the environment cannot add settings, and
// each reference is judged by the setting it sits in.
//
// Secret fields are the settings whose Go field carries the struct tag
// secret:"true" (consumers' secret, jwt keys' secret, admin.token,
// cluster.password). A node's own file (Lenient) expands references in any
// value, as operators write addresses and paths that way; a document read
// from Redis (Strict) expands them only in secret fields and is refused
// when it has one anywhere else: whoever can write to Redis must not be
// able to make a node serve, log or report its environment.

// Expansion says where ${NAME} references may stand.
type Expansion int

const (
	// Lenient expands references in every value: a node's own file.
	Lenient Expansion = iota
	// Strict expands references in secret fields only and refuses them
	// elsewhere: a document from Redis.
	Strict
)

// Within the text a reference is written as "${NAME}"; before the text is
// parsed it becomes "$" refOpen NAME refClose, which YAML takes as plain
// text everywhere (a "{" would open a flow mapping) and which keeps every
// column where it was. Both are private-use characters a configuration
// has no reason to hold; one that does is refused.
const (
	refOpen  = '\uE000'
	refClose = '\uE001'
)

// markRefs rewrites every reference of text into its parse-safe form; an
// escaped one keeps its extra "$" in front.
func markRefs(text []byte) []byte {
	return envRef.ReplaceAll(text, []byte("$$${1}"+string(refOpen)+"${2}"+string(refClose)))
}

// unmarkRefs writes the references of s back as the document wrote them.
func unmarkRefs(s string) string {
	if !strings.ContainsRune(s, refOpen) {
		return s
	}
	return strings.NewReplacer("$"+string(refOpen), "${", string(refClose), "}").Replace(s)
}

// refToken is one marked reference in a value: v[start:end] is its
// marked text, the escape's extra "$" included.
type refToken struct {
	name, fallback string
	hasFallback    bool
	escaped        bool
	start, end     int
}

// refTokens lists the marked references of v in order.
func refTokens(v string) []refToken {
	var out []refToken
	open := "$" + string(refOpen)
	for from := 0; ; {
		i := strings.Index(v[from:], open)
		if i < 0 {
			return out
		}
		i += from
		j := strings.IndexRune(v[i:], refClose)
		if j < 0 {
			return out
		}
		body := v[i+len(open) : i+j]
		t := refToken{name: body, start: i, end: i + j + len(string(refClose))}
		if k := strings.Index(body, ":-"); k >= 0 {
			t.name, t.fallback, t.hasFallback = body[:k], body[k+2:], true
		}
		if i > 0 && v[i-1] == '$' {
			t.escaped, t.start = true, i-1
		}
		out = append(out, t)
		from = t.end
	}
}

// refsIn lists the names referenced in a marked value, escapes left out.
func refsIn(v string) []string {
	var names []string
	for _, t := range refTokens(v) {
		if !t.escaped {
			names = append(names, t.name)
		}
	}
	return names
}

func hasRef(v string) bool { return len(refsIn(v)) > 0 }

// expanded is one value that came from the environment, kept to keep it
// out of messages.
type expanded struct {
	name, value string
	secret      bool
}

// minRedacted is the shortest value taken from the environment into a
// setting other than a secret that messages have replaced by its
// reference: shorter ones ("80", "on") would deface unrelated text. A
// secret's value is replaced whatever its length.
const minRedacted = 4

// redact replaces in msg every value taken from the environment with the
// reference it came from.
func redact(msg string, values []expanded) string {
	if len(values) == 0 {
		return msg
	}
	vs := append([]expanded(nil), values...)
	sort.Slice(vs, func(i, j int) bool { return len(vs[i].value) > len(vs[j].value) })
	for _, v := range vs {
		if v.value == "" || !v.secret && len(v.value) < minRedacted {
			continue
		}
		msg = strings.ReplaceAll(msg, v.value, "${"+v.name+"}")
	}
	return msg
}

// redactErr is err with every expanded value written as its reference;
// err itself when it holds none. A configuration Error stays one.
func redactErr(err error, values []expanded) error {
	if err == nil || len(values) == 0 {
		return err
	}
	if all, ok := err.(*Errors); ok {
		clean := &Errors{Total: all.Total}
		for _, e := range all.List {
			clean.List = append(clean.List, redactErr(e, values).(*Error))
		}
		return clean
	}
	msg := err.Error()
	clean := redact(msg, values)
	if clean == msg {
		return err
	}
	var ce *Error
	if errors.As(err, &ce) && ce.Error() == msg {
		return &Error{File: redact(ce.File, values), Line: ce.Line, Col: ce.Col, Msg: redact(ce.Msg, values)}
	}
	return errors.New(clean)
}

// refWalk finds, by the schema, which values hold references in secret
// fields and which elsewhere. A value reached through several settings
// (an alias) counts as elsewhere if any of them is not a secret field.
type refWalk struct {
	// secret holds every value met in a secret field, references or
	// not, with the field it was first met in.
	secret map[*yaml.Node]string
	public map[*yaml.Node]string // a reference met outside a secret field, and where
}

func newRefWalk(doc *yaml.Node) *refWalk {
	w := &refWalk{secret: map[*yaml.Node]string{}, public: map[*yaml.Node]string{}}
	w.node(doc, reflect.TypeOf(File{}), "", false)
	return w
}

func (w *refWalk) node(n *yaml.Node, t reflect.Type, path string, secret bool) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch n.Kind {
	case yaml.ScalarNode:
		where := strings.TrimSuffix(path, ".")
		if secret {
			if _, seen := w.secret[n]; !seen {
				w.secret[n] = where
			}
		} else if _, seen := w.public[n]; !seen && hasRef(n.Value) {
			w.public[n] = where
		}
		return
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			w.node(k, nil, path, false) // a key is never a secret
			var ft reflect.Type
			fsecret := false
			if t != nil {
				switch t.Kind() {
				case reflect.Struct:
					if f, ok := fieldOf(t, k.Value); ok {
						ft, fsecret = f.Type, f.Tag.Get("secret") == "true"
					} else if hasInline(t) {
						ft, _ = ownedType(t, k.Value)
					}
				case reflect.Map:
					ft = t.Elem()
				}
			}
			w.node(v, ft, path+k.Value+".", fsecret)
		}
	case yaml.SequenceNode:
		var et reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			et = t.Elem()
		}
		for i, item := range n.Content {
			w.node(item, et, fmt.Sprintf("%s[%d].", strings.TrimSuffix(path, "."), i), secret && et != nil && et.Kind() == reflect.String)
		}
	case yaml.DocumentNode:
		for _, c := range n.Content {
			w.node(c, t, path, secret)
		}
	}
}

// SecretFields lists the settings that hold secrets, as paths ("[]" for
// any item of a list), read from the secret:"true" tags of the file's
// schema and of the registered sections' types.
var SecretFields = sync.OnceValue(func() []string {
	var out []string
	var walk func(t reflect.Type, path string, depth int)
	walk = func(t reflect.Type, path string, depth int) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			if t.Kind() == reflect.Slice {
				path += "[]"
			} else if t.Kind() == reflect.Map {
				path += ".*"
			}
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || depth > 8 {
			return
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			key := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if key == "" || key == "-" || !f.IsExported() {
				continue
			}
			p := strings.TrimPrefix(path+"."+key, ".")
			if f.Tag.Get("secret") == "true" {
				out = append(out, p)
				continue
			}
			walk(f.Type, p, depth+1)
		}
	}
	walk(reflect.TypeOf(File{}), "", 0)
	for _, sec := range pipeline.Sections() { // the owners' types: consumers, jwt, …
		walk(reflect.TypeOf(sec.Config()), sec.Key, 0)
		if sec.Entries != nil { // and their plug-ins': discovery's providers
			for key, v := range sec.Entries() {
				walk(reflect.TypeOf(v), sec.Key+"."+key, 0)
			}
		}
	}
	sort.Strings(out)
	return out
})

func fieldOf(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if tag == key && tag != "-" && tag != "" {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// expandRefs replaces the references in doc's values with what lookup
// says, as mode allows, and writes escaped ones as the text they stand
// for; it returns the values it put in. A reference to a variable lookup
// does not have, and no default, is an error naming the variable; each is
// reported, and its value left empty.
func expandRefs(errs *problems, doc *yaml.Node, mode Expansion, lookup func(string) (string, bool)) []expanded {
	w := newRefWalk(doc)
	var out []expanded
	visit := func(n *yaml.Node) {
		if n.Kind != yaml.ScalarNode || !strings.ContainsRune(n.Value, refOpen) {
			return
		}
		tokens := refTokens(n.Value)
		if len(tokens) == 0 {
			return
		}
		where, public := w.public[n]
		_, inSecret := w.secret[n]
		secret := inSecret && !public
		if !secret && !public {
			where = "a value tollgate does not read as a setting"
		}
		if refs := refsIn(n.Value); mode == Strict && !secret && len(refs) > 0 {
			errs.add(&Error{Line: n.Line, Col: n.Column, Msg: fmt.Sprintf(
				"%s: ${%s} is expanded only in a secret field (%s); a configuration from redis may not refer to a node's environment anywhere else",
				where, refs[0], strings.Join(SecretFields(), ", "))})
			return
		}
		var b strings.Builder
		last, missing, refs := 0, false, false
		for _, t := range tokens {
			b.WriteString(n.Value[last:t.start])
			last = t.end
			if t.escaped {
				b.WriteString(unmarkRefs(n.Value[t.start+1 : t.end]))
				continue
			}
			refs = true
			v, ok := lookup(t.name)
			switch {
			case ok:
				out = append(out, expanded{name: t.name, value: v, secret: secret})
			case t.hasFallback:
				v = t.fallback
			default:
				errs.add(&Error{Line: n.Line, Col: n.Column, Msg: fmt.Sprintf(
					"${%s} is not set in the environment (write ${%s:-default} for a value to use when it is not)", t.name, t.name)})
				missing = true
			}
			b.WriteString(v)
		}
		b.WriteString(n.Value[last:])
		if missing {
			// Reported once, here, rather than again as a value its
			// setting cannot take.
			n.Value, n.Tag, n.Style = "", "!!null", 0
			return
		}
		n.Value = b.String()
		if refs && n.Style&(yaml.TaggedStyle|yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 && !secret {
			// A plain value reads as what it now says (a number, a
			// boolean), as it would have written out; a secret stays text.
			n.Tag = ""
		}
	}
	var sweep func(n *yaml.Node)
	sweep = func(n *yaml.Node) {
		visit(n)
		for _, c := range n.Content {
			sweep(c)
		}
	}
	sweep(doc)
	return out
}
