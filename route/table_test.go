package route

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

func ctxFor(method, host, uri string, headers ...string) *pipeline.Ctx {
	req := &fasthttp.Request{}
	req.Header.SetMethod(method)
	req.Header.SetHost(host)
	req.SetRequestURI(uri)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return pipeline.AcquireParsed(req, &fasthttp.Response{})
}

// hdrIs is a test Condition: header name equals val. With log set, every
// evaluation appends tag to it.
type hdrIs struct {
	name, val string
	tag       string
	log       *[]string
}

func (h *hdrIs) Eval(c *pipeline.Ctx) bool {
	if h.log != nil {
		*h.log = append(*h.log, h.tag)
	}
	return string(c.Req.Header.Peek(h.name)) == h.val
}

func nameOf(r *Route) string {
	if r == nil {
		return "<nil>"
	}
	return r.Name
}

func TestMatchPrecedence(t *testing.T) {
	routes := []*Route{
		{Name: "any-prefix", Path: "/", Kind: Prefix},
		{Name: "api-prefix", Path: "/api/", Kind: Prefix},
		{Name: "api-order-prefix", Path: "/api/order/", Kind: Prefix},
		{Name: "exact-create", Path: "/api/order/create", Methods: []string{"POST"}},
		{Name: "host-exact", Host: "admin.example.com", Path: "/api/", Kind: Prefix},
		{Name: "host-wild", Host: "*.example.com", Path: "/api/", Kind: Prefix},
		{Name: "priority", Priority: 10, Path: "/promo", Kind: Prefix},
	}
	table, err := NewTable(routes)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, host, uri, want string
	}{
		{"POST", "x.com", "/api/order/create", "exact-create"},
		{"GET", "x.com", "/api/order/create", "api-order-prefix"}, // method filter
		{"GET", "x.com", "/api/order/42", "api-order-prefix"},     // longest prefix
		{"GET", "x.com", "/api/user", "api-prefix"},
		{"GET", "admin.example.com", "/api/user", "host-exact"},    // exact host beats wildcard
		{"GET", "shop.example.com:8443", "/api/user", "host-wild"}, // wildcard, port ignored
		{"GET", "EXAMPLE.com", "/api/user", "api-prefix"},          // *.example.com does not match the apex
		{"GET", "SHOP.Example.COM", "/api/user", "host-wild"},      // hosts are case-insensitive
		{"GET", "x.com", "/promotions", "priority"},                // priority beats specificity
		{"GET", "x.com", "/other", "any-prefix"},
		{"GET", "x.com", "/api/../api/order/7", "api-order-prefix"}, // matched on the normalized path
	} {
		if got := nameOf(table.Match(ctxFor(tc.method, tc.host, tc.uri))); got != tc.want {
			t.Errorf("%s %s%s: got %s, want %s", tc.method, tc.host, tc.uri, got, tc.want)
		}
	}
}

// TestMatchRules has one case per precedence rule, each with its own table.
func TestMatchRules(t *testing.T) {
	type req struct {
		method, host, uri string
		headers           []string
		want              string
	}
	get := func(host, uri, want string, headers ...string) req {
		return req{"GET", host, uri, headers, want}
	}
	canary := &hdrIs{name: "X-Canary", val: "1"}
	for _, tc := range []struct {
		name   string
		routes []*Route
		reqs   []req
	}{
		{
			name: "priority beats specificity",
			routes: []*Route{
				{Name: "exact", Path: "/a"},
				{Name: "prefix-hi", Priority: 5, Path: "/", Kind: Prefix},
				{Name: "host-exact", Host: "h.com", Path: "/b"},
				{Name: "regex-hi", Priority: 1, Path: "^/b$", Kind: Regex},
			},
			reqs: []req{get("x.com", "/a", "prefix-hi"), get("h.com", "/b", "prefix-hi")},
		},
		{
			name: "higher priority regex beats exact",
			routes: []*Route{
				{Name: "exact", Path: "/b"},
				{Name: "regex-hi", Priority: 1, Path: "^/b$", Kind: Regex},
			},
			reqs: []req{get("h.com", "/b", "regex-hi")},
		},
		{
			name: "negative priority ranks last",
			routes: []*Route{
				{Name: "low", Priority: -1, Path: "/a"},
				{Name: "regex", Path: "a", Kind: Regex},
			},
			reqs: []req{get("h", "/a", "regex")},
		},
		{
			name: "exact beats prefix beats regex",
			routes: []*Route{
				{Name: "regex", Path: "^/a", Kind: Regex},
				{Name: "prefix", Path: "/a", Kind: Prefix},
				{Name: "exact", Path: "/a"},
			},
			reqs: []req{get("h", "/a", "exact"), get("h", "/ab", "prefix"), get("h", "/a/b", "prefix")},
		},
		{
			name: "regex when nothing else matches",
			routes: []*Route{
				{Name: "prefix", Path: "/api/", Kind: Prefix},
				{Name: "static", Path: `^/static/.+\.(css|js)$`, Kind: Regex},
				{Name: "unanchored", Path: `/v[0-9]+/`, Kind: Regex},
			},
			reqs: []req{
				get("h", "/static/app.css", "static"),
				get("h", "/static/app.png", "<nil>"),
				get("h", "/x/v2/y", "unanchored"), // the author anchors, or not
				get("h", "/api/v2/y", "prefix"),
			},
		},
		{
			name: "longer prefix first",
			routes: []*Route{
				{Name: "a", Path: "/a/", Kind: Prefix},
				{Name: "ab-slash", Path: "/a/b/", Kind: Prefix},
				{Name: "ab", Path: "/a/b", Kind: Prefix},
				{Name: "root", Path: "/", Kind: Prefix},
			},
			reqs: []req{
				get("h", "/a/b/c", "ab-slash"),
				get("h", "/a/bc", "ab"),
				get("h", "/a/c", "a"),
				get("h", "/a", "root"),
				get("h", "/", "root"),
			},
		},
		{
			name: "longer prefix beats host specificity",
			routes: []*Route{
				{Name: "host-short", Host: "h.com", Path: "/api/", Kind: Prefix},
				{Name: "any-long", Path: "/api/order/", Kind: Prefix},
			},
			reqs: []req{get("h.com", "/api/order/1", "any-long"), get("h.com", "/api/user", "host-short")},
		},
		{
			name: "exact host beats wildcard beats any host",
			routes: []*Route{
				{Name: "any", Path: "/p", Kind: Prefix},
				{Name: "wild", Host: "*.example.com", Path: "/p", Kind: Prefix},
				{Name: "exact-host", Host: "api.example.com", Path: "/p", Kind: Prefix},
				{Name: "any-exact", Path: "/q"},
				{Name: "wild-exact", Host: "*.example.com", Path: "/q"},
				{Name: "any-regex", Path: "^/r", Kind: Regex},
				{Name: "host-regex", Host: "api.example.com", Path: "^/r", Kind: Regex},
			},
			reqs: []req{
				get("api.example.com", "/p", "exact-host"),
				get("web.example.com", "/p", "wild"),
				get("example.org", "/p", "any"),
				get("web.example.com", "/q", "wild-exact"),
				get("api.example.com", "/r", "host-regex"),
				get("web.example.com", "/r", "any-regex"),
			},
		},
		{
			name: "deeper wildcard first",
			routes: []*Route{
				{Name: "shallow", Host: "*.example.com", Path: "/", Kind: Prefix},
				{Name: "deep", Host: "*.eu.example.com", Path: "/", Kind: Prefix},
				{Name: "tld", Host: "*.com", Path: "/", Kind: Prefix},
			},
			reqs: []req{
				get("shop.eu.example.com", "/", "deep"),
				get("a.shop.eu.example.com", "/", "deep"),
				get("eu.example.com", "/", "shallow"),
				get("shop.example.com", "/", "shallow"),
				get("example.com", "/", "tld"),
				get("com", "/", "<nil>"),
			},
		},
		{
			name: "host port, case, trailing dot, IPv6",
			routes: []*Route{
				{Name: "api", Host: "API.Example.com", Path: "/"},
				{Name: "v6", Host: "[::1]", Path: "/"},
				{Name: "v4", Host: "10.0.0.1", Path: "/"},
			},
			reqs: []req{
				get("api.example.com", "/", "api"),
				get("Api.EXAMPLE.com:8443", "/", "api"),
				get("api.example.com.", "/", "api"),
				get("api.example.com.:80", "/", "api"),
				get("[::1]:8080", "/", "v6"),
				get("[::1]", "/", "v6"),
				get("10.0.0.1:80", "/", "v4"),
				get("api.example.co", "/", "<nil>"),
				get("", "/", "<nil>"),
			},
		},
		{
			name: "wildcard never matches its apex",
			routes: []*Route{
				{Name: "wild", Host: "*.example.com", Path: "/", Kind: Prefix},
			},
			reqs: []req{
				get("example.com", "/", "<nil>"),
				get("EXAMPLE.COM:443", "/", "<nil>"),
				get(".example.com", "/", "<nil>"),
				get("badexample.com", "/", "<nil>"),
				get("a.example.com", "/", "wild"),
			},
		},
		{
			name: "method fallthrough",
			routes: []*Route{
				{Name: "post-order", Path: "/order", Methods: []string{"POST"}},
				{Name: "purge", Path: "/order", Methods: []string{"purge"}},
				{Name: "get-root", Path: "/", Kind: Prefix, Methods: []string{"GET", "HEAD"}},
				{Name: "regex-delete", Path: "^/order$", Kind: Regex, Methods: []string{"DELETE"}},
			},
			reqs: []req{
				{"POST", "h", "/order", nil, "post-order"},
				{"GET", "h", "/order", nil, "get-root"},
				{"HEAD", "h", "/order", nil, "get-root"},
				{"PURGE", "h", "/order", nil, "purge"},
				{"DELETE", "h", "/order", nil, "regex-delete"},
				{"PUT", "h", "/order", nil, "<nil>"},
			},
		},
		{
			// HEAD is GET without a body: a GET-only route owns it, or a
			// HEAD would reach the public route behind without the GET
			// route's auth.
			name: "GET covers HEAD",
			routes: []*Route{
				{Name: "private-get", Path: "/priv/", Kind: Prefix, Methods: []string{"GET"}},
				{Name: "private-post", Path: "/post/", Kind: Prefix, Methods: []string{"post"}},
				{Name: "public", Path: "/", Kind: Prefix},
			},
			reqs: []req{
				{"GET", "h", "/priv/x", nil, "private-get"},
				{"HEAD", "h", "/priv/x", nil, "private-get"},
				{"POST", "h", "/priv/x", nil, "public"},
				{"HEAD", "h", "/post/x", nil, "public"},
			},
		},
		{
			name: "condition fallthrough",
			routes: []*Route{
				{Name: "canary", Path: "/x", When: canary},
				{Name: "stable", Path: "/x"},
				{Name: "canary-prefix", Path: "/y", Kind: Prefix, When: canary},
				{Name: "root", Path: "/", Kind: Prefix},
			},
			reqs: []req{
				get("h", "/x", "canary", "X-Canary", "1"),
				get("h", "/x", "stable"),
				get("h", "/x", "stable", "X-Canary", "2"),
				get("h", "/y/1", "canary-prefix", "X-Canary", "1"),
				get("h", "/y/1", "root"),
			},
		},
		{
			name: "config order breaks ties, then list position",
			routes: []*Route{
				{Name: "second", Path: "/t", Order: 2},
				{Name: "first", Path: "/t", Order: 1},
				{Name: "same-a", Path: "/u", Kind: Prefix},
				{Name: "same-b", Path: "/u", Kind: Prefix},
			},
			reqs: []req{get("h", "/t", "first"), get("h", "/u", "same-a")},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table, err := NewTable(tc.routes)
			if err != nil {
				t.Fatal(err)
			}
			for _, rq := range tc.reqs {
				c := ctxFor(rq.method, rq.host, rq.uri, rq.headers...)
				if got := nameOf(table.Match(c)); got != rq.want {
					t.Errorf("%s %q %s %v: got %s, want %s", rq.method, rq.host, rq.uri, rq.headers, got, rq.want)
				}
				if got, want := nameOf(table.Match(c)), nameOf(refMatch(tc.routes, c)); got != want {
					t.Errorf("%s %q %s: table says %s, reference says %s", rq.method, rq.host, rq.uri, got, want)
				}
			}
		})
	}
}

// Conditions are evaluated lazily, best rank first, and never for routes
// ranked after an unconditional match.
func TestConditionsLazyInRankOrder(t *testing.T) {
	var log []string
	cond := func(tag string) Condition { return &hdrIs{name: "X-Go", val: tag, tag: tag, log: &log} }
	table, err := NewTable([]*Route{
		{Name: "c-regex", Path: "^/a", Kind: Regex, When: cond("c-regex")},
		{Name: "c-root", Path: "/", Kind: Prefix, When: cond("c-root")},
		{Name: "c-exact", Path: "/a/b", When: cond("c-exact")},
		{Name: "c-hi", Priority: 1, Path: "/a", Kind: Prefix, When: cond("c-hi")},
		{Name: "c-a", Path: "/a/", Kind: Prefix, When: cond("c-a")},
		{Name: "plain", Path: "/a", Kind: Prefix},
		{Name: "c-post", Path: "/a/b", Methods: []string{"POST"}, When: cond("c-post")},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		val, want string
		evals     []string
	}{
		{"c-hi", "c-hi", []string{"c-hi"}},
		{"c-a", "c-a", []string{"c-hi", "c-exact", "c-a"}},
		{"none", "plain", []string{"c-hi", "c-exact", "c-a"}},
		{"c-root", "plain", []string{"c-hi", "c-exact", "c-a"}}, // c-root ranks after plain
	} {
		log = log[:0]
		if got := nameOf(table.Match(ctxFor("GET", "h", "/a/b", "X-Go", tc.val))); got != tc.want {
			t.Errorf("X-Go %s: got %s, want %s", tc.val, got, tc.want)
		}
		if !slices.Equal(log, tc.evals) {
			t.Errorf("X-Go %s: evaluated %v, want %v", tc.val, log, tc.evals)
		}
	}
}

// More conditional candidates than the stack holds still resolve in rank
// order, each condition evaluated once.
func TestMatchManyConditionalCandidates(t *testing.T) {
	const n = 5*maxCandidates + 3
	var log []string
	var routes []*Route
	for i := range n {
		tag := strconv.Itoa(i)
		r := &Route{Name: "c" + tag, Path: "/", Kind: Prefix, When: &hdrIs{name: "X-N", val: tag, tag: tag, log: &log}}
		switch i % 3 {
		case 1:
			r.Path, r.Kind = "/a/b", Exact
		case 2:
			r.Path, r.Kind = "^/a", Regex
		}
		routes = append(routes, r)
	}
	routes = append(routes, &Route{Name: "fallback", Priority: -1, Path: "/", Kind: Prefix})
	table, err := NewTable(routes)
	if err != nil {
		t.Fatal(err)
	}
	rank := map[string]int{}
	for i, r := range table.Routes() {
		rank[r.Name] = i
	}
	for _, v := range []string{"0", "1", "2", "31", "32", "33", "64", "100", strconv.Itoa(n - 1), "none"} {
		log = log[:0]
		got := table.Match(ctxFor("GET", "h", "/a/b", "X-N", v))
		want := "c" + v
		if v == "none" {
			want = "fallback"
		}
		if nameOf(got) != want {
			t.Errorf("X-N %s: got %s, want %s", v, nameOf(got), want)
		}
		// Every route ranked before the winner is conditional and matches.
		if evals := min(rank[want]+1, n); len(log) != evals {
			t.Errorf("X-N %s: %d evaluations, want %d", v, len(log), evals)
		}
		seen := map[string]bool{}
		for i, tag := range log {
			if seen[tag] {
				t.Errorf("X-N %s: condition %s evaluated twice", v, tag)
			}
			seen[tag] = true
			if i > 0 && rank["c"+tag] < rank["c"+log[i-1]] {
				t.Errorf("X-N %s: %s evaluated after %s", v, tag, log[i-1])
			}
		}
	}
}

func TestNoMatchAndBadTables(t *testing.T) {
	table, err := NewTable([]*Route{{Name: "a", Path: "/a"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := table.Match(ctxFor("GET", "h", "/b")); r != nil {
		t.Fatalf("matched %s", r.Name)
	}
	empty, err := NewTable(nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := empty.Match(ctxFor("GET", "h", "/")); r != nil {
		t.Fatalf("empty table matched %s", r.Name)
	}
	for _, tc := range []struct {
		name   string
		routes []*Route
		errHas string
	}{
		{"no name", []*Route{{Path: "/a"}}, "#1 has no name"},
		{"duplicate", []*Route{{Name: "a", Path: "/a"}, {Name: "a", Path: "/b"}}, `"a" is defined twice`},
		{"relative path", []*Route{{Name: "rel", Path: "a"}}, `"rel"`},
		{"empty prefix", []*Route{{Name: "ep", Path: "", Kind: Prefix}}, `"ep"`},
		{"bad regex", []*Route{{Name: "ok", Path: "/"}, {Name: "re", Path: "^/(a", Kind: Regex}}, `route "re": regex`},
		{"empty regex", []*Route{{Name: "re0", Kind: Regex}}, `"re0"`},
		{"host with port", []*Route{{Name: "hp", Host: "a.com:80", Path: "/"}}, `"hp"`},
		{"inner wildcard", []*Route{{Name: "hw", Host: "a.*.com", Path: "/"}}, `"hw"`},
		{"bare wildcard", []*Route{{Name: "bw", Host: "*.", Path: "/"}}, `"bw"`},
		{"empty label", []*Route{{Name: "el", Host: "a..com", Path: "/"}}, `"el"`},
		{"open IPv6", []*Route{{Name: "v6", Host: "[::1", Path: "/"}}, `"v6"`},
		{"long host", []*Route{{Name: "lh", Host: strings.Repeat("a", 254), Path: "/"}}, `"lh"`},
		{"empty method", []*Route{{Name: "em", Path: "/", Methods: []string{""}}}, `"em"`},
		{"bad kind", []*Route{{Name: "bk", Path: "/", Kind: 9}}, `"bk"`},
		{"nil route", []*Route{nil}, "#1 is nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewTable(tc.routes)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("error %q does not say %q", err, tc.errHas)
			}
		})
	}
}

func TestRoutesInPrecedenceOrder(t *testing.T) {
	routes := []*Route{
		{Name: "regex", Path: "^/", Kind: Regex},
		{Name: "any-prefix", Path: "/a", Kind: Prefix},
		{Name: "wild-prefix", Host: "*.b.c", Path: "/a", Kind: Prefix},
		{Name: "deep-wild-prefix", Host: "*.a.b.c", Path: "/a", Kind: Prefix},
		{Name: "host-prefix", Host: "a.b.c", Path: "/a", Kind: Prefix},
		{Name: "long-prefix", Path: "/a/b", Kind: Prefix},
		{Name: "exact", Path: "/z"},
		{Name: "late", Path: "/y", Order: 9},
		{Name: "early", Path: "/x", Order: 1},
		{Name: "top", Priority: 3, Path: "^/", Kind: Regex},
	}
	table, err := NewTable(routes)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range table.Routes() {
		got = append(got, r.Name)
	}
	want := []string{"top", "exact", "early", "late", "long-prefix", "host-prefix", "deep-wild-prefix", "wild-prefix", "any-prefix", "regex"}
	if !slices.Equal(got, want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
	table.Routes()[0] = nil
	if table.Routes()[0] == nil {
		t.Fatal("Routes exposes the table's own slice")
	}
}

// Hosts longer than the lower-casing buffer are not DNS names; they can
// still fall under a wildcard and never equal a route's host.
func TestMatchLongHost(t *testing.T) {
	table, err := NewTable([]*Route{
		{Name: "wild", Host: "*.Example.com", Path: "/w"},
		{Name: "exact", Host: "example.com", Path: "/e"},
		{Name: "any", Path: "/", Kind: Prefix},
	})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("Ab.", 120) + "EXAMPLE.com"
	for _, tc := range []struct{ host, uri, want string }{
		{long, "/w", "wild"},
		{strings.ToLower(long), "/w", "wild"},
		{long + ":8080", "/w", "wild"},
		{long, "/e", "any"},
		{strings.Repeat("X", 300), "/w", "any"},
		{strings.Repeat("x", 300) + ".example.com", "/w", "wild"},
	} {
		c := ctxFor("GET", tc.host, tc.uri)
		if got := nameOf(table.Match(c)); got != tc.want {
			t.Errorf("%d-byte host %s: got %s, want %s", len(tc.host), tc.uri, got, tc.want)
		}
	}
}

// refMatch is the precedence rules written plainly: try every route, keep
// the best that matches.
func refMatch(routes []*Route, c *pipeline.Ctx) *Route {
	host := strings.ToLower(string(c.Req.Header.Host()))
	if strings.HasPrefix(host, "[") {
		if i := strings.Index(host, "]"); i >= 0 {
			host = host[:i+1]
		}
	} else if i := strings.Index(host, ":"); i >= 0 {
		host = host[:i]
	}
	host = strings.TrimSuffix(host, ".")
	path := string(c.Req.URI().Path())
	method := string(c.Req.Header.Method())

	// hostScore: exact host 1000, wildcard its number of labels, any 0.
	hostScore := func(r *Route) int {
		h := strings.TrimSuffix(strings.ToLower(r.Host), ".")
		switch {
		case h == "":
			return 0
		case strings.HasPrefix(h, "*."):
			return strings.Count(h, ".")
		}
		return 1000
	}
	matches := func(r *Route) bool {
		h := strings.TrimSuffix(strings.ToLower(r.Host), ".")
		if suffix, ok := strings.CutPrefix(h, "*."); ok {
			if !strings.HasSuffix(host, "."+suffix) || len(host) <= len(suffix)+1 {
				return false
			}
		} else if h != "" && h != host {
			return false
		}
		switch r.Kind {
		case Exact:
			if path != r.Path {
				return false
			}
		case Prefix:
			if !strings.HasPrefix(path, r.Path) {
				return false
			}
		default:
			if !refRegexp(r.Path).MatchString(path) {
				return false
			}
		}
		if len(r.Methods) > 0 && !slices.ContainsFunc(r.Methods, func(m string) bool {
			m = strings.ToUpper(m)
			return m == method || m == "GET" && method == "HEAD"
		}) {
			return false
		}
		return r.When == nil || r.When.Eval(c)
	}
	better := func(a *Route, ai int, b *Route, bi int) bool {
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Kind == Prefix && len(a.Path) != len(b.Path) {
			return len(a.Path) > len(b.Path)
		}
		if hostScore(a) != hostScore(b) {
			return hostScore(a) > hostScore(b)
		}
		if a.Order != b.Order {
			return a.Order < b.Order
		}
		return ai < bi
	}
	best, bestI := (*Route)(nil), -1
	for i, r := range routes {
		if matches(r) && (best == nil || better(r, i, best, bestI)) {
			best, bestI = r, i
		}
	}
	return best
}

var refRegexps sync.Map // pattern → *regexp.Regexp

func refRegexp(pattern string) *regexp.Regexp {
	if re, ok := refRegexps.Load(pattern); ok {
		return re.(*regexp.Regexp)
	}
	re := regexp.MustCompile(pattern)
	refRegexps.Store(pattern, re)
	return re
}

// randomTable makes a route set from small pools so that routes overlap a
// lot, and requests that hit them.
type randomTable struct {
	rng *rand.Rand
	// vals is how many values a condition tests X-T for; with many, few
	// conditions hold and Match has to go deep into its candidates.
	vals int
}

var (
	rtHosts   = []string{"", "", "", "a.com", "B.a.com", "*.a.com", "*.b.a.com", "*.com", "x.b.a.com", "[::1]", "other.org."}
	rtPaths   = []string{"/", "/a", "/a/", "/a/b", "/ab", "/a/b/c", "/b", "/b/1", "/c/d"}
	rtRegexes = []string{`^/a/\d+$`, `/b`, `c$`, `^/a/[a-z]+`, `^/$`, `^/(a|b)/`}
	rtMethods = [][]string{nil, nil, nil, {"GET"}, {"POST"}, {"get", "POST"}, {"PURGE"}, {"DELETE", "PURGE"}}
	rqHosts   = []string{"a.com", "A.COM:80", "b.a.com", "x.b.a.com", "X.B.A.com:8443", "y.x.b.a.com", "com", "q.com",
		"other.org", "other.org.", "[::1]:8080", "", "a.com."}
	rqPaths   = []string{"/", "/a", "/a/", "/a/b", "/ab", "/a/b/c", "/a/b/c/d", "/a/123", "/a/xyz", "/b", "/b/1", "/c/d", "/zzz", "/a/../b/1"}
	rqMethods = []string{"GET", "GET", "HEAD", "POST", "PURGE", "DELETE", "PATCH"}
)

func (g randomTable) pick(s []string) string { return s[g.rng.IntN(len(s))] }

// routes makes n routes; one in condEvery has no condition.
func (g randomTable) routes(n, condEvery int) []*Route {
	routes := make([]*Route, n)
	for i := range routes {
		r := &Route{Name: fmt.Sprintf("r%d", i), Host: g.pick(rtHosts), Methods: rtMethods[g.rng.IntN(len(rtMethods))]}
		switch k := g.rng.IntN(10); {
		case k < 4:
			r.Path, r.Kind = g.pick(rtPaths), Exact
		case k < 8:
			r.Path, r.Kind = g.pick(rtPaths), Prefix
		default:
			r.Path, r.Kind = g.pick(rtRegexes), Regex
		}
		if g.rng.IntN(4) == 0 {
			r.Priority = g.rng.IntN(3) - 1
		}
		if g.rng.IntN(condEvery) != 0 {
			r.When = &hdrIs{name: "X-T", val: strconv.Itoa(g.rng.IntN(g.vals))}
		}
		r.Order = g.rng.IntN(n/2 + 1) // ties on purpose
		routes[i] = r
	}
	return routes
}

func (g randomTable) request() *pipeline.Ctx {
	var hdr []string
	if v := g.rng.IntN(g.vals + 1); v < g.vals {
		hdr = []string{"X-T", strconv.Itoa(v)}
	}
	return ctxFor(g.pick(rqMethods), g.pick(rqHosts), g.pick(rqPaths), hdr...)
}

// TestMatchRandom compares Match with refMatch on random tables, some of
// them with more conditional candidates than the stack holds.
func TestMatchRandom(t *testing.T) {
	g := randomTable{rng: rand.New(rand.NewPCG(1, 2))}
	var deep int
	sets, perSet := 3000, 30
	if testing.Short() {
		sets = 300
	}
	var matched, overflowed int
	for set := range sets {
		n, condEvery := 1+g.rng.IntN(40), 3
		g.vals = 3
		if set%10 == 0 {
			// Mostly conditional, rarely true: crowds the candidate slots.
			n, condEvery, g.vals = 150+g.rng.IntN(250), 100, 60
		}
		routes := g.routes(n, condEvery)
		table, err := NewTable(routes)
		if err != nil {
			t.Fatal(err)
		}
		for range perSet {
			c := g.request()
			got, want := table.Match(c), refMatch(routes, c)
			if got != want {
				t.Fatalf("set %d, %s %q %s X-T=%q: got %s, want %s\nroutes in table order:\n%s",
					set, c.Req.Header.Method(), c.Req.Header.Host(), c.Req.URI().Path(), c.Req.Header.Peek("X-T"),
					nameOf(got), nameOf(want), dump(table.Routes()))
			}
			if got != nil {
				matched++
			}
			if ahead := conditionalAhead(table, c); ahead > maxCandidates {
				overflowed++
				if got != nil && got.When != nil && rankOf(table, got) >= maxCandidates {
					deep++ // the answer was beyond the first pass
				}
			}
		}
	}
	t.Logf("%d matched, %d needed more than %d candidate slots, %d answered beyond them",
		matched, overflowed, maxCandidates, deep)
	if matched == 0 || overflowed == 0 || deep == 0 {
		t.Fatal("random requests do not exercise the table")
	}
}

// conditionalAhead counts the conditional routes matching c (condition
// aside) ranked before the first unconditional one.
func conditionalAhead(t *Table, c *pipeline.Ctx) int {
	n := 0
	for _, r := range t.Routes() {
		plain := *r
		plain.When = nil
		if refMatch([]*Route{&plain}, c) == nil {
			continue
		}
		if r.When == nil {
			break
		}
		n++
	}
	return n
}

func rankOf(t *Table, r *Route) int { return slices.Index(t.Routes(), r) }

func dump(routes []*Route) string {
	var b strings.Builder
	for _, r := range routes {
		fmt.Fprintf(&b, "  %s prio=%d %s %q host=%q methods=%v when=%v order=%d\n",
			r.Name, r.Priority, r.Kind, r.Path, r.Host, r.Methods, r.When, r.Order)
	}
	return b.String()
}

func TestMatchConcurrent(t *testing.T) {
	g := randomTable{rng: rand.New(rand.NewPCG(3, 4)), vals: 3}
	routes := g.routes(200, 3)
	table, err := NewTable(routes)
	if err != nil {
		t.Fatal(err)
	}
	reqs := make([]*pipeline.Ctx, 64)
	want := make([]*Route, len(reqs))
	for i := range reqs {
		reqs[i] = g.request()
		want[i] = refMatch(routes, reqs[i])
	}
	const workers = 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			// A Ctx belongs to one goroutine; the table is shared.
			for range 250 {
				for j := w; j < len(reqs); j += workers {
					if got := table.Match(reqs[j]); got != want[j] {
						t.Errorf("request %d: got %s, want %s", j, nameOf(got), nameOf(want[j]))
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// benchTable builds n routes in a realistic mix: per service of ten routes,
// six exact paths (one POST-only, one for an exact host, one under a
// wildcard host, one with a condition), three prefixes and the service
// prefix; plus four regexes and two host-wide routes. It returns requests
// that hit each kind, with the route each must match.
func benchTable(tb testing.TB, n int) (*Table, []*pipeline.Ctx, []string) {
	var routes []*Route
	for i := range n {
		svc := i / 10
		r := &Route{Name: "r" + strconv.Itoa(i), Path: fmt.Sprintf("/api/s%d/items/%d", svc, i)}
		switch i % 10 {
		case 1:
			r.Host = fmt.Sprintf("t%d.example.com", svc)
		case 2:
			r.Host = fmt.Sprintf("*.s%d.example.com", svc)
		case 3:
			r.Path, r.Methods = fmt.Sprintf("/api/s%d/orders/%d", svc, i), []string{"POST"}
		case 4:
			r.When = &hdrIs{name: "X-Canary", val: "1"}
		case 5:
			r.Methods = []string{"GET", "HEAD"}
		case 7, 8:
			r.Path, r.Kind = fmt.Sprintf("/api/s%d/p%d/", svc, i), Prefix
		case 9:
			r.Path, r.Kind = fmt.Sprintf("/api/s%d/", svc), Prefix
		}
		routes = append(routes, r)
	}
	routes = append(routes,
		&Route{Name: "static", Path: `^/static/.+\.(css|js)$`, Kind: Regex},
		&Route{Name: "legacy", Path: `^/v[0-9]+/legacy/`, Kind: Regex},
		&Route{Name: "files", Path: `^/files/[0-9a-f]{8}$`, Kind: Regex},
		&Route{Name: "health", Path: `^/healthz?$`, Kind: Regex, Methods: []string{"GET"}},
		&Route{Name: "admin", Host: "admin.example.com", Path: "/", Kind: Prefix, Priority: 1},
		&Route{Name: "docs", Host: "*.docs.example.com", Path: "/", Kind: Prefix},
	)
	table, err := NewTable(routes)
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	pick := func(kind int) (int, int) { // a route of this kind, and its service
		i := rng.IntN(n/10)*10 + kind
		return i, i / 10
	}
	var reqs []*pipeline.Ctx
	var want []string
	add := func(method, host, uri, name string, hdr ...string) {
		reqs = append(reqs, ctxFor(method, host, uri, hdr...))
		want = append(want, name)
	}
	i, s := pick(0)
	add("GET", "api.example.com", fmt.Sprintf("/api/s%d/items/%d", s, i), "r"+strconv.Itoa(i))
	i, s = pick(6)
	add("GET", "API.Example.com:443", fmt.Sprintf("/api/s%d/items/%d", s, i), "r"+strconv.Itoa(i))
	i, s = pick(1)
	add("GET", fmt.Sprintf("t%d.example.com", s), fmt.Sprintf("/api/s%d/items/%d", s, i), "r"+strconv.Itoa(i))
	i, s = pick(2)
	add("GET", fmt.Sprintf("eu.s%d.example.com", s), fmt.Sprintf("/api/s%d/items/%d", s, i), "r"+strconv.Itoa(i))
	i, s = pick(3)
	add("POST", "api.example.com", fmt.Sprintf("/api/s%d/orders/%d", s, i), "r"+strconv.Itoa(i))
	add("GET", "api.example.com", fmt.Sprintf("/api/s%d/orders/%d", s, i), "r"+strconv.Itoa(s*10+9)) // method falls through
	i, s = pick(4)
	add("GET", "api.example.com", fmt.Sprintf("/api/s%d/items/%d", s, i), "r"+strconv.Itoa(i), "X-Canary", "1")
	add("GET", "api.example.com", fmt.Sprintf("/api/s%d/items/%d", s, i), "r"+strconv.Itoa(s*10+9)) // condition falls through
	i, s = pick(7)
	add("GET", "api.example.com", fmt.Sprintf("/api/s%d/p%d/orders/42/lines", s, i), "r"+strconv.Itoa(i))
	_, s = pick(9)
	add("GET", "api.example.com", fmt.Sprintf("/api/s%d/catalog/shoes?page=2", s), "r"+strconv.Itoa(s*10+9))
	add("GET", "api.example.com", "/static/js/app.js", "static")
	add("GET", "api.example.com", "/healthz", "health")
	add("GET", "admin.example.com", "/api/s0/items/0", "admin")
	add("GET", "v2.docs.example.com", "/guide/intro", "docs")
	add("GET", "api.example.com", "/nothing/here", "<nil>")
	add("DELETE", "api.example.com", fmt.Sprintf("/api/s%d/items/%d", s, s*10+5), "r"+strconv.Itoa(s*10+9))
	for j, c := range reqs {
		if got := nameOf(table.Match(c)); got != want[j] {
			tb.Fatalf("routes=%d request %d %s %s%s: got %s, want %s", n, j,
				c.Req.Header.Method(), c.Req.Header.Host(), c.Req.URI().Path(), got, want[j])
		}
	}
	return table, reqs, want
}

func BenchmarkMatch(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10000} {
		b.Run("routes="+strconv.Itoa(n), func(b *testing.B) {
			table, reqs, _ := benchTable(b, n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				table.Match(reqs[i])
				if i++; i == len(reqs) {
					i = 0
				}
			}
		})
	}
}
