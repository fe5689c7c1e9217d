package config

import (
	"bytes"
	"sort"

	"gopkg.in/yaml.v3"
)

// CheckDocument validates a configuration document meant for Redis the
// way a node compiles it, without connecting anywhere: errors name
// name:line:column. ${NAME} may stand in secret fields only, as nodes
// expand nothing else from a document in Redis. The document's cluster
// and config sections are ignored, as nodes ignore them (their own file
// says how to reach Redis).
// A consumer's secret_file that this host does not have is taken as
// present: nodes read it from their own disk. notes say what was assumed.
func CheckDocument(name string, text []byte, lookup func(string) (string, bool)) (notes []string, err error) {
	f, err := ParseDocument(name, text, lookup)
	if err != nil {
		return nil, err
	}
	f.Cluster, f.Config = Cluster{}, Source{}
	f.Defaults()
	c := NewCompiler()
	c.Offline = true
	c.ForOtherHosts = true
	c.Note = func(n string) { notes = append(notes, n) }
	snap, err := c.Compile(f, name)
	if err != nil {
		return notes, err
	}
	c.Discard(snap)
	return notes, nil
}

// PlainSecrets finds secrets written in clear in a document: values of
// the secret fields (SecretFields) that are not exactly one ${NAME}. Such
// a secret must not be stored in Redis, where everyone who can read the
// configuration would have it: it belongs in each node's environment
// (${NAME}) or in a secret_file. It judges values as a node decodes them,
// anchors and aliases followed; findings come in the order of the text.
func PlainSecrets(name string, text []byte) []*Error {
	if bytes.ContainsAny(text, string([]rune{refOpen, refClose})) {
		return nil // CheckDocument reports it
	}
	var root yaml.Node
	if err := yaml.Unmarshal(markRefs(text), &root); err != nil || len(root.Content) == 0 {
		return nil // CheckDocument reports it
	}
	w := newRefWalk(root.Content[0])
	var out []*Error
	for n, where := range w.secret {
		if n.Value == "" || isOneRef(n.Value) {
			continue
		}
		out = append(out, &Error{File: name, Line: n.Line, Col: n.Column,
			Msg: where + " is written in clear; use ${NAME} (each node's environment) or secret_file"})
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Line < out[j].Line || out[i].Line == out[j].Line && out[i].Col < out[j].Col
	})
	return out
}

// isOneRef reports a marked value that is one reference and nothing else.
func isOneRef(v string) bool {
	t := refTokens(v)
	return len(t) == 1 && !t[0].escaped && !t[0].hasFallback && t[0].start == 0 && t[0].end == len(v)
}
