package config

import (
	"errors"
	"slices"

	"github.com/tollgate/tollgate/pipeline"
	"gopkg.in/yaml.v3"
)

// provisionSections hands each registered top-level section to its owner
// (pipeline.Section), in their order: its node, decoded into the owner's
// type, or the owner's empty config when the file has none, so that the
// owner writes its defaults in. What the owners build goes into env; the
// configs, defaults written in, are kept for the effective configuration.
func provisionSections(env *pipeline.Env, f *File) error {
	f.sections = map[string]any{}
	for _, s := range pipeline.Sections() {
		cfg := s.Config()
		node, written := f.Features[s.Key]
		if written {
			if err := node.Decode(cfg); err != nil {
				return decodeError(s.Key, &node, err)
			}
		}
		if err := s.Provision(env, cfg); err != nil {
			var placed *pipeline.PlacedError
			if errors.As(err, &placed) && placed.Line > 0 {
				return &Error{Line: placed.Line, Col: placed.Col, Msg: placed.Msg}
			}
			msg := err.Error()
			if placed != nil {
				msg = placed.Msg
			}
			if !written {
				return &Error{Msg: msg}
			}
			line, col := placeByQuote(&node, msg)
			return &Error{Line: line, Col: col, Msg: msg}
		}
		f.sections[s.Key] = cfg
	}
	return nil
}

// MarshalYAML writes the file with each section as its owner provisioned
// it, defaults written in: the effective configuration the admin API
// shows.
func (f File) MarshalYAML() (any, error) {
	type plain File
	var n yaml.Node
	if err := n.Encode((*plain)(&f)); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(f.sections))
	for k := range f.sections {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		var v yaml.Node
		if err := v.Encode(f.sections[k]); err != nil {
			return nil, err
		}
		setMapValue(&n, k, &v)
	}
	return &n, nil
}

// setMapValue sets key in the mapping n to v, adding it when n has none.
func setMapValue(n *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			n.Content[i+1] = v
			return
		}
	}
	n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
}

// decodeError places an error decoding a section's node where the value
// is, in the configuration's words, as the file's own settings' are.
func decodeError(key string, node *yaml.Node, err error) error {
	if ps := decodeProblems(node, err); len(ps) > 0 {
		return ps[0]
	}
	return &Error{Line: node.Line, Col: node.Column, Msg: key + ": " + err.Error()}
}
