package config

import (
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Owners' errors often name what they are about ("consumer \"app1\":
// secret must be at least 16 bytes") without saying where it is written;
// such an error is placed at the first value or key under the section's
// node that is what its first quoted name says, so the operator is sent
// to the entry, not to the top of the section.

var quotedName = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// placeByQuote returns the line and column under n of the first quoted
// name in msg; n's own when there is none or it is not found.
func placeByQuote(n *yaml.Node, msg string) (line, col int) {
	line, col = n.Line, n.Column
	q := quotedName.FindString(msg)
	if q == "" {
		return line, col
	}
	name, err := strconv.Unquote(q)
	if err != nil || name == "" {
		return line, col
	}
	nth := 1
	if strings.Contains(msg, " twice") {
		nth = 2 // the name's second writing is the mistake
	}
	if at := findScalar(n, name, nth); at != nil {
		return at.Line, at.Column
	}
	return line, col
}

// findScalar finds under n, in the order of the text, the nth key or
// value that is text (the last one when there are fewer).
func findScalar(n *yaml.Node, text string, nth int) *yaml.Node {
	var found *yaml.Node
	seen := 0
	var walk func(x *yaml.Node, depth int)
	walk = func(x *yaml.Node, depth int) {
		if seen >= nth || x == nil || depth > maxDepth {
			return
		}
		if x.Kind == yaml.ScalarNode && x.Value == text {
			found = x
			seen++
			return
		}
		for _, c := range x.Content {
			walk(c, depth+1)
		}
	}
	walk(n, 0)
	return found
}

// placeInRoute places an error of the i-th route, written at line, at
// the value its message quotes (placeByQuote), else at the route.
func (f *File) placeInRoute(i, line int, msg string) (int, int) {
	if f.doc == nil {
		return line, 0
	}
	routes := mapValue(f.doc, "routes")
	for routes != nil && routes.Kind == yaml.AliasNode && routes.Alias != nil {
		routes = routes.Alias
	}
	if routes == nil || routes.Kind != yaml.SequenceNode || i >= len(routes.Content) || routes.Content[i].Line != line {
		return line, 0 // not the node the route was decoded from
	}
	return placeByQuote(routes.Content[i], msg)
}
