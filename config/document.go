package config

import (
	"os"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// CheckDocument validates a configuration document meant for Redis the
// way a node compiles it, without connecting anywhere: errors name
// name:line:column. The document's cluster and config sections are
// ignored, as nodes ignore them (their own file says how to reach Redis).
// A consumer's secret_file that this host does not have is taken as
// present: nodes read it from their own disk. notes say what was assumed.
func CheckDocument(name string, text []byte, lookup func(string) (string, bool)) (notes []string, err error) {
	f, err := Parse(name, text, lookup)
	if err != nil {
		return nil, err
	}
	f.Cluster, f.Config = Cluster{}, Source{}
	for _, cc := range f.Consumers {
		if cc == nil || cc.SecretFile == "" {
			continue
		}
		if _, err := os.Stat(cc.SecretFile); err != nil {
			notes = append(notes, "consumer "+cc.AppKey+": secret_file "+cc.SecretFile+" is not on this host; each node reads its own")
			cc.SecretFile, cc.Secret = "", strings.Repeat("x", 32)
		}
	}
	f.Defaults()
	c := NewCompiler()
	c.Offline = true
	snap, err := c.Compile(f, name)
	if err != nil {
		return notes, err
	}
	c.Discard(snap)
	return notes, nil
}

// refMark stands for ${NAME} while PlainSecrets reads the text as
// written: "${" is not valid YAML everywhere (a flow mapping), so each
// reference is replaced by a plain word first.
const refMark = "tollgate-env-ref-"

// secretRef is the one form a secret may take in a document stored in
// Redis: a reference to each node's environment.
var secretRef = regexp.MustCompile(`^` + refMark + `[A-Za-z_][A-Za-z0-9_]*$`)

// PlainSecrets finds secrets written in clear in a document (consumers'
// secret and jwt.keys' secret), which must not be stored in Redis, where
// everyone who can read the configuration would have them: such a secret
// belongs in each node's environment (${NAME}) or in a secret_file.
// It reads the text as written, before ${NAME} is expanded.
func PlainSecrets(name string, text []byte) []*Error {
	marked := envRef.ReplaceAll(text, []byte(refMark+"$1"))
	var root yaml.Node
	if err := yaml.Unmarshal(marked, &root); err != nil || len(root.Content) == 0 {
		return nil // Parse reports it
	}
	var out []*Error
	check := func(where string, item *yaml.Node) {
		if v := mapValue(item, "secret"); v != nil && v.Value != "" && !secretRef.MatchString(v.Value) {
			out = append(out, &Error{File: name, Line: v.Line, Col: v.Column,
				Msg: where + ".secret is written in clear; use ${NAME} (each node's environment) or secret_file"})
		}
	}
	doc := root.Content[0]
	if cs := mapValue(doc, "consumers"); cs != nil && cs.Kind == yaml.SequenceNode {
		for _, item := range cs.Content {
			key := "consumer"
			if k := mapValue(item, "app_key"); k != nil {
				key = "consumer " + k.Value
			}
			check(key, item)
		}
	}
	if j := mapValue(doc, "jwt"); j != nil {
		if ks := mapValue(j, "keys"); ks != nil && ks.Kind == yaml.SequenceNode {
			for _, item := range ks.Content {
				check("jwt key", item)
			}
		}
	}
	return out
}
