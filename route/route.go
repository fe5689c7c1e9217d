// Package route decides which route a request belongs to and what the
// route does with it: the route table (hosts, paths, methods, priorities,
// conditions), rewrites, API version marks, traffic splits and mocks.
package route

import "github.com/tollgate/tollgate/pipeline"

// Matcher finds the route for a request, or nil.
type Matcher interface {
	Match(c *pipeline.Ctx) *Route
}

// Condition is a compiled `when:` expression. Eval must be safe for
// concurrent use and allocate nothing.
type Condition interface {
	Eval(c *pipeline.Ctx) bool
}

// PathKind says how a route's Path is matched. Exact beats Prefix beats
// Regex when priorities are equal.
type PathKind uint8

const (
	Exact PathKind = iota
	Prefix
	Regex
)

func (k PathKind) String() string {
	switch k {
	case Exact:
		return "exact"
	case Prefix:
		return "prefix"
	}
	return "regex"
}

// Route is one compiled routing rule. Immutable once built.
type Route struct {
	Name     string
	Priority int // higher first
	// Host is "" (any host), an exact host, or "*.suffix" (any subdomain of
	// suffix, not suffix itself). Hosts compare case-insensitively and
	// without the port.
	Host string
	// Path is an exact path, a prefix, or a regular expression (Go RE2
	// syntax) per Kind. A regex matches anywhere in the normalized path
	// unless the author anchors it with ^ and $.
	Path    string
	Kind    PathKind
	Methods []string  // empty = any
	When    Condition // nil = always
	Chain   *pipeline.Chain

	// Order is the route's position in the configuration, the last
	// tie-breaker.
	Order int
}
