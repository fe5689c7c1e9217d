// Package route decides which route a request belongs to. This first table
// matches host (exact or "*.suffix"), path (exact or prefix) and method with
// explicit priorities; it sits behind Matcher so a richer router can
// replace it without touching the server.
package route

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/tollgate/tollgate/pipeline"
)

// Matcher finds the route for a request, or nil.
type Matcher interface {
	Match(c *pipeline.Ctx) *Route
}

// Route is one compiled routing rule. Immutable once built.
type Route struct {
	Name     string
	Priority int
	// Host is "" (any host), an exact host, or "*.suffix" (any subdomain of
	// suffix, not suffix itself).
	Host string
	// Path is matched exactly, or as a prefix when Prefix is set.
	Path    string
	Prefix  bool
	Methods []string // empty = any
	Chain   *pipeline.Chain

	hostSuffix []byte // ".suffix" for wildcard hosts
	host       []byte
	path       []byte
	methods    [][]byte
	order      int
}

// Table is an immutable, ordered list of routes.
type Table struct {
	routes []*Route
}

// NewTable orders routes for matching: higher priority first; then exact
// paths before prefixes, longer paths first, host-specific before any-host;
// then configuration order.
func NewTable(routes []*Route) (*Table, error) {
	seen := map[string]bool{}
	for i, r := range routes {
		if r.Name == "" {
			return nil, fmt.Errorf("route #%d has no name", i+1)
		}
		if seen[r.Name] {
			return nil, fmt.Errorf("route %q is defined twice", r.Name)
		}
		seen[r.Name] = true
		if r.Path == "" || r.Path[0] != '/' {
			return nil, fmt.Errorf("route %q: path %q must start with /", r.Name, r.Path)
		}
		r.order = i
		r.path = []byte(r.Path)
		r.host, r.hostSuffix = nil, nil
		switch {
		case strings.HasPrefix(r.Host, "*."):
			r.hostSuffix = []byte(strings.ToLower(r.Host[1:]))
		case r.Host != "":
			r.host = []byte(strings.ToLower(r.Host))
		}
		r.methods = r.methods[:0]
		for _, m := range r.Methods {
			r.methods = append(r.methods, []byte(strings.ToUpper(m)))
		}
	}
	sorted := append([]*Route(nil), routes...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		if a.Prefix != b.Prefix {
			return !a.Prefix
		}
		if len(a.Path) != len(b.Path) {
			return len(a.Path) > len(b.Path)
		}
		if (a.Host == "") != (b.Host == "") {
			return a.Host != ""
		}
		return a.order < b.order
	})
	return &Table{routes: sorted}, nil
}

// Routes returns the routes in match order.
func (t *Table) Routes() []*Route { return t.routes }

// Match implements Matcher.
func (t *Table) Match(c *pipeline.Ctx) *Route {
	path := c.Req.URI().Path()
	host := hostOnly(c.Req.Header.Host())
	method := c.Req.Header.Method()
	for _, r := range t.routes {
		if r.matches(host, path, method) {
			return r
		}
	}
	return nil
}

func (r *Route) matches(host, path, method []byte) bool {
	if r.Prefix {
		if !bytes.HasPrefix(path, r.path) {
			return false
		}
	} else if !bytes.Equal(path, r.path) {
		return false
	}
	if r.host != nil && !bytes.EqualFold(host, r.host) {
		return false
	}
	if r.hostSuffix != nil {
		if len(host) <= len(r.hostSuffix) || !bytes.EqualFold(host[len(host)-len(r.hostSuffix):], r.hostSuffix) {
			return false
		}
	}
	if len(r.methods) > 0 {
		ok := false
		for _, m := range r.methods {
			if bytes.Equal(m, method) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// hostOnly drops a port from a Host value ("a.com:8080" → "a.com"), leaving
// bracketed IPv6 literals intact.
func hostOnly(h []byte) []byte {
	if i := bytes.LastIndexByte(h, ':'); i >= 0 && bytes.IndexByte(h[i:], ']') < 0 {
		return h[:i]
	}
	return h
}
