package discovery

import (
	"errors"
	"fmt"
	"slices"

	"github.com/tollgate/tollgate/pipeline"
	"gopkg.in/yaml.v3"
)

// Spec is a service's `discover` setting: the provider it asks (From),
// the name the service has in that registry, and the provider's own
// options, which the provider decodes (Provider.Target).
type Spec struct {
	From string
	Name string
	// EmptyGrace overrides the section's empty_grace for this service.
	EmptyGrace *pipeline.Duration
	// Settings is the whole mapping as written, decoded generically: what
	// the watch's identity is computed from (pipeline.Digest), so that
	// any option of any provider changes it.
	Settings map[string]any
	// Line is where the setting is written, for errors.
	Line int `digest:"-"`

	node yaml.Node
}

// keys this package reads from `discover` itself; the provider gets the
// rest (and may read from and name too).
var specKeys = []string{"from", "name", "empty_grace"}

// UnmarshalYAML keeps the mapping for the provider and reads the keys
// every provider shares.
func (s *Spec) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: discover: want a mapping {from: PROVIDER, name: NAME, …}", n.Line)
	}
	var common struct {
		From       string             `yaml:"from"`
		Name       string             `yaml:"name"`
		EmptyGrace *pipeline.Duration `yaml:"empty_grace"`
	}
	// The common keys alone: the provider refuses what is neither its
	// nor these when it decodes the rest.
	var sub yaml.Node
	sub.Kind, sub.Tag, sub.Line, sub.Column = yaml.MappingNode, "!!map", n.Line, n.Column
	for i := 0; i+1 < len(n.Content); i += 2 {
		if slices.Contains(specKeys, n.Content[i].Value) {
			sub.Content = append(sub.Content, n.Content[i], n.Content[i+1])
		}
	}
	if err := sub.Decode(&common); err != nil {
		return err
	}
	var settings map[string]any
	if err := n.Decode(&settings); err != nil {
		return err
	}
	*s = Spec{From: common.From, Name: common.Name, EmptyGrace: common.EmptyGrace, Settings: settings, Line: n.Line, node: *n}
	return nil
}

// KeysCheckedByOwner tells config that the provider checks the keys
// (Provider.Target), with their lines.
func (*Spec) KeysCheckedByOwner() {}

// MarshalYAML writes the setting as it was written.
func (s Spec) MarshalYAML() (any, error) {
	if s.node.Kind == 0 {
		return s.Settings, nil
	}
	return &s.node, nil
}

// check refuses a spec without its provider or name.
func (s *Spec) check() error {
	switch {
	case s.From == "":
		return errors.New("discover: from names no provider (e.g. from: etcd)")
	case s.Name == "":
		return errors.New("discover: name is empty: it is the service's name in the registry")
	}
	return nil
}

// decoder decodes the mapping for the provider: its type may have from
// and name fields or not, and never meets a complaint about the keys this
// package reads.
func (s *Spec) decoder() func(any) error {
	return Decoder(&s.node, specKeys...)
}
