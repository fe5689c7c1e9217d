package pipeline

import (
	"fmt"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a duration in a feature's or section's settings, written
// the Go way ("250ms", "5s", "1m") and shown back so.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// UnmarshalYAML parses a Go duration string; the error names its place.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &PlacedError{Line: n.Line, Col: n.Column, Msg: "expected a duration such as \"5s\""}
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return &PlacedError{Line: n.Line, Col: n.Column, Msg: fmt.Sprintf("invalid duration %q (want e.g. \"250ms\", \"5s\")", n.Value)}
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration back in Go form.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }
