package route

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/tollgate/tollgate/pipeline"
)

// Table is an immutable, ordered list of routes.
type Table struct {
	entries []entry
}

// entry is a route with its match data in the form matching needs.
type entry struct {
	r          *Route
	host       []byte // exact host, lower case
	hostSuffix []byte // ".suffix" for wildcard hosts
	path       []byte
	methods    [][]byte
}

// NewTable orders routes for matching: higher priority first; then exact
// paths before prefixes, longer paths first, host-specific before any-host;
// then configuration order.
func NewTable(routes []*Route) (*Table, error) {
	seen := map[string]bool{}
	t := &Table{}
	for i, r := range routes {
		if r.Name == "" {
			return nil, fmt.Errorf("route #%d has no name", i+1)
		}
		if seen[r.Name] {
			return nil, fmt.Errorf("route %q is defined twice", r.Name)
		}
		seen[r.Name] = true
		if r.Kind == Regex {
			return nil, fmt.Errorf("route %q: regex paths are not supported by this table", r.Name)
		}
		if r.Path == "" || r.Path[0] != '/' {
			return nil, fmt.Errorf("route %q: path %q must start with /", r.Name, r.Path)
		}
		e := entry{r: r, path: []byte(r.Path)}
		switch {
		case strings.HasPrefix(r.Host, "*."):
			e.hostSuffix = []byte(strings.ToLower(r.Host[1:]))
		case r.Host != "":
			e.host = []byte(strings.ToLower(r.Host))
		}
		for _, m := range r.Methods {
			e.methods = append(e.methods, []byte(strings.ToUpper(m)))
		}
		t.entries = append(t.entries, e)
	}
	sort.SliceStable(t.entries, func(i, j int) bool {
		a, b := t.entries[i].r, t.entries[j].r
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if len(a.Path) != len(b.Path) {
			return len(a.Path) > len(b.Path)
		}
		if (a.Host == "") != (b.Host == "") {
			return a.Host != ""
		}
		return a.Order < b.Order
	})
	return t, nil
}

// Match implements Matcher.
func (t *Table) Match(c *pipeline.Ctx) *Route {
	path := c.Req.URI().Path()
	host := hostOnly(c.Req.Header.Host())
	method := c.Req.Header.Method()
	for i := range t.entries {
		if e := &t.entries[i]; e.matches(host, path, method) && (e.r.When == nil || e.r.When.Eval(c)) {
			return e.r
		}
	}
	return nil
}

func (e *entry) matches(host, path, method []byte) bool {
	if e.r.Kind == Prefix {
		if !bytes.HasPrefix(path, e.path) {
			return false
		}
	} else if !bytes.Equal(path, e.path) {
		return false
	}
	if e.host != nil && !bytes.EqualFold(host, e.host) {
		return false
	}
	if e.hostSuffix != nil {
		if len(host) <= len(e.hostSuffix) || !bytes.EqualFold(host[len(host)-len(e.hostSuffix):], e.hostSuffix) {
			return false
		}
	}
	if len(e.methods) > 0 {
		ok := false
		for _, m := range e.methods {
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
