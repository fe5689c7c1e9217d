package route

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/pipeline"
)

// Table is an immutable route table; Match is safe for concurrent use and
// allocates nothing.
//
// Precedence. Every route gets a rank when the table is built: its index in
// precedence order, which is
//
//  1. higher Priority first;
//  2. then Exact paths before Prefix paths before Regex paths;
//  3. then, for prefixes, the longer prefix first;
//  4. then the more specific host: an exact host, then wildcards with the
//     deeper (longer) suffix first, then routes for any host;
//  5. then lower Order (the position in the configuration), and last the
//     position in the slice given to NewTable.
//
// A request is answered by the best-ranked route whose host and path match,
// whose method list allows the request method and whose condition holds.
// A route that fails its method or condition lets the next one match.
//
// Matching. Hosts compare case-insensitively, without the port and without
// a trailing dot; "*.example.com" covers every subdomain of example.com at
// any depth but not example.com itself. Paths are the request's decoded,
// normalized path. A prefix is a byte prefix ("/api" also covers "/apis");
// a regex is searched for anywhere in the path, so authors anchor it with
// ^ and $ as they mean it. Method names compare exactly, after the route's
// are upper-cased.
//
// Layout. Hosts select path indexes: a map from exact lower-case host, a map
// from wildcard suffix ("example.com" for "*.example.com") probed with each
// dot-suffix of the request host, and one index for routes with no host.
// Each path index holds exact paths in a map, prefixes in a byte radix tree
// (every route on the way down the request path is a candidate) and regexes
// in a list. The cost of a match grows with the length of the host and the
// path, not with the number of routes; the regex lists are the one linear
// part, and they are not tried at all when a better-ranked exact or prefix
// route has already answered.
type Table struct {
	entries []entry // in precedence order: a route's rank is its index

	hosts   map[string]*pathIndex // exact host, lower case
	wild    map[string]*pathIndex // wildcard suffix without "*.", lower case
	anyHost *pathIndex            // routes without a host; nil if none
	// maxWild is the length of the longest wildcard suffix and wildLens
	// the set of their lengths: other dot-suffixes of a request host are
	// not worth a map probe.
	maxWild  int
	wildLens [hostBufLen / 64]uint64
	// firstRegex is the best rank of any regex route (noRank if none), so
	// a request already answered by a better route skips the regex pass.
	firstRegex int32
}

var _ Matcher = (*Table)(nil)

// entry is a route with its match data in the form matching needs.
type entry struct {
	r       *Route
	when    Condition
	re      *regexp.Regexp // Regex routes only
	methods methodSet
}

// pathIndex is the path part of the table for one host (or wildcard, or any
// host). Rank lists are in ascending order, best first.
type pathIndex struct {
	exact  map[string][]int32
	prefix *node // nil if the host has no prefix routes
	regex  []int32
}

const (
	// noRank is worse than every rank.
	noRank = math.MaxInt32
	// maxHostLen is the longest host name a route may name (the DNS limit).
	maxHostLen = 253
	// hostBufLen is the stack buffer a request host is lower-cased into;
	// it holds any host a route can name.
	hostBufLen = 256
	// maxCandidates is how many conditional candidates one pass of Match
	// keeps on the stack. More are handled by further passes (see Match).
	maxCandidates = 32
)

// RouteError is a NewTable error about the route at Index.
type RouteError struct {
	Index int
	Err   error
}

func (e *RouteError) Error() string { return e.Err.Error() }
func (e *RouteError) Unwrap() error { return e.Err }

// NewTable validates routes and builds their table. Names must be non-empty
// and unique, exact and prefix paths must start with "/", regexes must
// compile, hosts must be a name, a bracketed IPv6 literal or "*.suffix",
// without a port. Errors name the route. The routes are shared, not copied,
// and must not change afterwards.
func NewTable(routes []*Route) (*Table, error) {
	type built struct {
		e        entry
		idx      int
		host     string // normalized host or wildcard suffix
		wildcard bool
		hostRank int // exact > wildcard (by suffix length) > any
		plen     int // prefix length for Prefix routes, else 0
	}
	seen := make(map[string]bool, len(routes))
	bs := make([]built, 0, len(routes))
	for i, r := range routes {
		if r == nil {
			return nil, &RouteError{Index: i, Err: fmt.Errorf("route #%d is nil", i+1)}
		}
		if r.Name == "" {
			return nil, &RouteError{Index: i, Err: fmt.Errorf("route #%d has no name", i+1)}
		}
		if seen[r.Name] {
			return nil, &RouteError{Index: i, Err: fmt.Errorf("route %q is defined twice", r.Name)}
		}
		seen[r.Name] = true
		b := built{e: entry{r: r, when: r.When}, idx: i}
		var err error
		if b.host, b.wildcard, err = normHost(r.Host); err != nil {
			return nil, &RouteError{Index: i, Err: fmt.Errorf("route %q: %w", r.Name, err)}
		}
		switch {
		case b.host == "":
		case b.wildcard:
			b.hostRank = 1 + len(b.host)
		default:
			b.hostRank = math.MaxInt
		}
		switch r.Kind {
		case Exact, Prefix:
			if r.Path == "" || r.Path[0] != '/' {
				return nil, &RouteError{Index: i, Err: fmt.Errorf("route %q: path %q must start with /", r.Name, r.Path)}
			}
			// Requests are matched in canonical form, so a path written
			// otherwise could never match; say what to write instead.
			if canon, err := codec.CanonicalPath(r.Path); err != nil {
				return nil, &RouteError{Index: i, Err: fmt.Errorf("route %q: path %q: %w", r.Name, r.Path, err)}
			} else if canon != r.Path {
				return nil, &RouteError{Index: i, Err: fmt.Errorf("route %q: path %q is not in canonical form; write %q", r.Name, r.Path, canon)}
			}
			if r.Kind == Prefix {
				b.plen = len(r.Path)
			}
		case Regex:
			if r.Path == "" {
				return nil, &RouteError{Index: i, Err: fmt.Errorf("route %q: empty regex", r.Name)}
			}
			if b.e.re, err = regexp.Compile(r.Path); err != nil {
				return nil, &RouteError{Index: i, Err: fmt.Errorf("route %q: regex %q: %w", r.Name, r.Path, err)}
			}
		default:
			return nil, &RouteError{Index: i, Err: fmt.Errorf("route %q: unknown path kind %d", r.Name, r.Kind)}
		}
		if b.e.methods, err = newMethodSet(r.Methods); err != nil {
			return nil, &RouteError{Index: i, Err: fmt.Errorf("route %q: %w", r.Name, err)}
		}
		bs = append(bs, b)
	}
	if len(bs) >= noRank {
		return nil, fmt.Errorf("%d routes are more than a table holds", len(bs))
	}
	slices.SortFunc(bs, func(a, b built) int {
		if c := cmp.Compare(b.e.r.Priority, a.e.r.Priority); c != 0 {
			return c
		}
		if c := cmp.Compare(a.e.r.Kind, b.e.r.Kind); c != 0 {
			return c
		}
		if c := cmp.Compare(b.plen, a.plen); c != 0 {
			return c
		}
		if c := cmp.Compare(b.hostRank, a.hostRank); c != 0 {
			return c
		}
		if c := cmp.Compare(a.e.r.Order, b.e.r.Order); c != 0 {
			return c
		}
		return cmp.Compare(a.idx, b.idx)
	})

	t := &Table{entries: make([]entry, len(bs)), firstRegex: noRank}
	index := func(m *map[string]*pathIndex, key string) *pathIndex {
		if *m == nil {
			*m = map[string]*pathIndex{}
		}
		pi := (*m)[key]
		if pi == nil {
			pi = &pathIndex{}
			(*m)[key] = pi
		}
		return pi
	}
	// Ranks are added in ascending order, so every rank list comes out
	// sorted without further work.
	for i := range bs {
		b := &bs[i]
		rank := int32(i)
		t.entries[i] = b.e
		var pi *pathIndex
		switch {
		case b.host == "":
			if t.anyHost == nil {
				t.anyHost = &pathIndex{}
			}
			pi = t.anyHost
		case b.wildcard:
			pi = index(&t.wild, b.host)
			t.maxWild = max(t.maxWild, len(b.host))
			t.wildLens[len(b.host)/64] |= 1 << (len(b.host) % 64)
		default:
			pi = index(&t.hosts, b.host)
		}
		r := b.e.r
		switch r.Kind {
		case Exact:
			if pi.exact == nil {
				pi.exact = map[string][]int32{}
			}
			pi.exact[r.Path] = append(pi.exact[r.Path], rank)
		case Prefix:
			if pi.prefix == nil {
				pi.prefix = &node{}
			}
			pi.prefix.insert(r.Path, rank)
		case Regex:
			pi.regex = append(pi.regex, rank)
			t.firstRegex = min(t.firstRegex, rank)
		}
	}
	for _, pi := range t.indexes() {
		if pi.prefix != nil {
			pi.prefix.finish()
		}
	}
	return t, nil
}

func (t *Table) indexes() []*pathIndex {
	var all []*pathIndex
	for _, pi := range t.hosts {
		all = append(all, pi)
	}
	for _, pi := range t.wild {
		all = append(all, pi)
	}
	if t.anyHost != nil {
		all = append(all, t.anyHost)
	}
	return all
}

// Routes returns the table's routes in precedence order: of the routes that
// match a request, the first in this order that allows its method and whose
// condition holds is the answer. The slice is a fresh copy; the routes are
// shared.
func (t *Table) Routes() []*Route {
	if t == nil {
		return nil
	}
	rs := make([]*Route, len(t.entries))
	for i := range t.entries {
		rs[i] = t.entries[i].r
	}
	return rs
}

// Match implements Matcher: it returns the best-ranked route for the
// request, or nil. It reads the Host header, the method and the request's
// canonical target (c.Target: Host and Path).
//
// Match gathers candidates from the indexes of the request's exact host,
// of each wildcard that covers it and of "any host". A candidate whose
// method fits and which has no condition settles the answer for every worse
// rank, so only better-ranked conditional candidates are kept, on the stack
// and sorted; their conditions are then evaluated lazily in rank order. If
// more than maxCandidates of them qualify, the best maxCandidates are kept
// and, should all of them fail, the gathering repeats for ranks after the
// last one tried. No allocation on any path.
func (t *Table) Match(c *pipeline.Ctx) *Route {
	if t == nil || len(t.entries) == 0 {
		return nil
	}
	var buf [hostBufLen]byte
	host, whole := lowerHost(&buf, hostOnly(c.Target.Host))
	path := c.Target.Path
	method := c.Req.Header.Method()
	s := search{t: t, method: method, bit: methodBit(method), best: noRank, lo: -1}
	for {
		s.gather(host, whole, path, false)
		if t.firstRegex < s.best {
			s.gather(host, whole, path, true)
		}
		for _, rank := range s.cand[:s.n] {
			if rank >= s.best {
				return t.entries[s.best].r
			}
			if e := &t.entries[rank]; e.when.Eval(c) {
				return e.r
			}
		}
		if !s.overflow {
			break
		}
		// Every kept candidate failed its condition; those dropped rank
		// after the last kept one.
		s.lo, s.n, s.overflow = s.cand[s.n-1], 0, false
	}
	if s.best == noRank {
		return nil
	}
	return t.entries[s.best].r
}

// search is the state of one Match; it lives on the stack.
type search struct {
	t      *Table
	method []byte
	bit    uint16
	// best is the best rank found that needs no condition: nothing worse
	// can win. lo is the last rank an earlier pass tried: nothing up to it
	// is a candidate any more.
	best, lo int32
	n        int
	overflow bool
	cand     [maxCandidates]int32 // conditional candidates, ascending
}

// gather offers the routes of every index covering host: exact and prefix
// paths, or, with regexes set, the regex routes.
func (s *search) gather(host []byte, whole bool, path []byte, regexes bool) {
	t := s.t
	// A host longer than the buffer (not whole) cannot equal a route's
	// host; its tail still serves for wildcard suffixes.
	if whole && t.hosts != nil {
		if pi := t.hosts[string(host)]; pi != nil {
			s.index(pi, path, regexes)
		}
	}
	if t.wild != nil {
		// Dot-suffixes from the longest that a wildcard can be: the
		// deepest first. A dot at 0 would make the apex match.
		from := max(len(host)-t.maxWild-1, 0)
		for i := from; i < len(host); i++ {
			if host[i] != '.' || i == 0 && whole {
				continue
			}
			if l := len(host) - i - 1; t.wildLens[l/64]&(1<<(l%64)) == 0 {
				continue
			}
			if pi := t.wild[string(host[i+1:])]; pi != nil {
				s.index(pi, path, regexes)
			}
		}
	}
	if t.anyHost != nil {
		s.index(t.anyHost, path, regexes)
	}
}

func (s *search) index(pi *pathIndex, path []byte, regexes bool) {
	if regexes {
		// Linear in the host's regex routes, cut short by better answers.
		for _, rank := range pi.regex {
			if rank >= s.best {
				return
			}
			if e := &s.t.entries[rank]; rank > s.lo && e.methods.allows(s.method, s.bit) && e.re.Match(path) {
				s.take(rank, e)
			}
		}
		return
	}
	if pi.exact != nil {
		if ranks := pi.exact[string(path)]; ranks != nil {
			s.offer(ranks)
		}
	}
	if pi.prefix != nil {
		s.walk(pi.prefix, path)
	}
}

// offer considers ranks, ascending, whose paths match.
func (s *search) offer(ranks []int32) {
	for _, rank := range ranks {
		if rank >= s.best {
			return
		}
		if e := &s.t.entries[rank]; rank > s.lo && e.methods.allows(s.method, s.bit) {
			s.take(rank, e)
		}
	}
}

// take records a candidate whose host, path and method match.
func (s *search) take(rank int32, e *entry) {
	if e.when == nil {
		s.best = rank
		return
	}
	if s.n == maxCandidates {
		s.overflow = true
		if rank > s.cand[s.n-1] {
			return
		}
		s.n--
	}
	i := s.n
	for i > 0 && s.cand[i-1] > rank {
		s.cand[i] = s.cand[i-1]
		i--
	}
	s.cand[i] = rank
	s.n++
}

// hostOnly drops a port from a Host value ("a.com:8080" → "a.com"), leaving
// bracketed IPv6 literals intact, and a trailing dot ("a.com." → "a.com").
func hostOnly(h []byte) []byte {
	if i := bytes.LastIndexByte(h, ':'); i >= 0 && bytes.IndexByte(h[i:], ']') < 0 {
		h = h[:i]
	}
	if n := len(h); n > 0 && h[n-1] == '.' {
		h = h[:n-1]
	}
	return h
}

// lowerHost returns h in lower case: h itself when it has no upper-case
// letter, else a copy in buf. A host too long for buf is not a DNS name
// and cannot equal a route's host; then only its tail is lowered, which is
// enough for every wildcard suffix, and whole is false.
func lowerHost(buf *[hostBufLen]byte, h []byte) (lower []byte, whole bool) {
	i := 0
	for i < len(h) && (h[i] < 'A' || h[i] > 'Z') {
		i++
	}
	if i == len(h) {
		return h, true
	}
	whole = len(h) <= len(buf)
	if !whole {
		h = h[len(h)-len(buf):]
	}
	for i, b := range h {
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		buf[i] = b
	}
	return buf[:len(h)], whole
}

// normHost checks and normalizes a route's host: lower case, no trailing
// dot, "*." split off into wildcard.
func normHost(h string) (host string, wildcard bool, err error) {
	if h == "" {
		return "", false, nil
	}
	host = strings.TrimSuffix(strings.ToLower(h), ".")
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		host, wildcard = rest, true
	}
	switch {
	case host == "":
		return "", false, fmt.Errorf("host %q names no host", h)
	case len(host) > maxHostLen:
		return "", false, fmt.Errorf("host %q is longer than %d bytes", h, maxHostLen)
	case strings.Contains(host, "*"):
		return "", false, fmt.Errorf("host %q: a wildcard is only allowed as a leading \"*.\"", h)
	case host[0] == '[':
		if wildcard || host[len(host)-1] != ']' || strings.IndexByte(host, ']') != len(host)-1 {
			return "", false, fmt.Errorf("host %q is not a bracketed IPv6 literal without port", h)
		}
	case strings.ContainsAny(host, ":/[] \t"):
		return "", false, fmt.Errorf("host %q must be a host name without port", h)
	case host[0] == '.' || strings.Contains(host, ".."):
		return "", false, fmt.Errorf("host %q has an empty label", h)
	}
	return host, wildcard, nil
}

// methodSet is a route's method list: a bit per common method, the others
// by name. GET brings HEAD with it (as nginx's limit_except does): HEAD is
// GET without the body (RFC 9110 §9.3.2), so a route that serves GET must
// also own its HEAD, or a HEAD would slip past the route's auth and
// limits to a wider route behind it.
type methodSet struct {
	any   bool
	bits  uint16
	other []string
}

func newMethodSet(methods []string) (methodSet, error) {
	ms := methodSet{any: len(methods) == 0}
	for _, m := range methods {
		if m == "" {
			return ms, fmt.Errorf("empty method")
		}
		m = strings.ToUpper(m)
		if bit := methodBit([]byte(m)); bit != 0 {
			ms.bits |= bit
		} else {
			ms.other = append(ms.other, m)
		}
	}
	if ms.bits&methodBit(strGET) != 0 {
		ms.bits |= methodBit(strHEAD)
	}
	return ms, nil
}

// allows reports whether a request method (bit = methodBit(m)) is in the set.
func (ms *methodSet) allows(m []byte, bit uint16) bool {
	if ms.any || ms.bits&bit != 0 {
		return true
	}
	if bit != 0 {
		return false
	}
	for _, o := range ms.other {
		if o == string(m) {
			return true
		}
	}
	return false
}

var strGET, strHEAD = []byte("GET"), []byte("HEAD")

// methodBit gives each common method a bit; 0 for the others.
func methodBit(m []byte) uint16 {
	switch string(m) {
	case "GET":
		return 1 << 0
	case "HEAD":
		return 1 << 1
	case "POST":
		return 1 << 2
	case "PUT":
		return 1 << 3
	case "DELETE":
		return 1 << 4
	case "PATCH":
		return 1 << 5
	case "OPTIONS":
		return 1 << 6
	case "CONNECT":
		return 1 << 7
	case "TRACE":
		return 1 << 8
	}
	return 0
}
