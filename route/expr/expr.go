// Package expr compiles the boolean condition expressions of route rules
// (`when:`) and evaluates them against requests.
//
// An expression is compiled once, when a configuration snapshot is built,
// into an immutable tree of typed nodes; evaluating it reads the request in
// place and allocates nothing. A compiled *Expr is safe for concurrent use.
//
// # Grammar
//
//	expr    = and { "||" and } .
//	and     = unary { "&&" unary } .
//	unary   = "!" unary | "(" expr ")" | test .
//	test    = source [ ( "==" | "!=" ) value
//	                 | "~=" regex
//	                 | "in" "[" value { "," value } "]" ] .
//	source  = "ip"
//	        | ( "query" | "header" | "cookie" | "form" ) "." name
//	        | "json" "." segment { "." segment } .
//	name    = bare | string .          // bare: letters, digits and _ - . $ @ :
//	segment = bare-without-dot | string .
//	value   = string | number .        // a number stands for its own text
//	string  = `"` { char | escape } `"` .
//	escape  = `\"` | `\\` | `\/` | `\b` | `\f` | `\n` | `\r` | `\t` | `\u` hex4 .
//	regex   = `"` { char | `\` char } `"` .  // handed to RE2 as written
//
// Precedence, tightest first: "!", comparison, "&&", "||". A "!" applies to
// the whole test after it, so `!query.a == "1"` means `!(query.a == "1")`.
// Parentheses and "!" nest at most MaxDepth deep. Spaces, tabs and newlines
// separate tokens anywhere except inside a source (`query.a`, not `query. a`).
//
// # Sources
//
//   - query.NAME: the first value of the URL query parameter NAME, after
//     percent-decoding ("+" is a space). `?a` and `?a=` both make query.a
//     present with an empty value.
//   - header.NAME: the first field named NAME; names compare
//     case-insensitively whatever the transport's normalization.
//   - cookie.NAME: the cookie NAME from the Cookie header(s), as fasthttp
//     parses them: names are case-sensitive (RFC 6265), quotes around a value
//     are removed, and `vip=` is present with an empty value.
//   - form.NAME: the first value of NAME in an application/x-www-form-urlencoded
//     body, percent-decoded.
//   - json.PATH: the value at a dotted path into a JSON body
//     (application/json or any type ending in +json): `json.order.items.0.id`.
//     A segment made only of digits also indexes arrays. See "JSON" below.
//   - ip: the client address the gateway believes (pipeline.Ctx.ClientIP).
//
// form and json sources read only a body that is fully buffered and not
// content-encoded (gzip bodies and the like are skipped). When the body is a
// stream the sources are absent and the stream is left untouched: it still
// belongs to the upstream.
//
// # Operators
//
//   - A bare source is an existence test: true when the source is present,
//     even with an empty value. For json, null counts as present; only a
//     missing key or index is absent.
//   - == compares the value with a literal, byte for byte. `a != b` is
//     exactly `!(a == b)`: it is true when the source is absent.
//   - in [...] is true when the value equals one of the literals.
//   - ~= is true when the Go RE2 regular expression matches anywhere in the
//     value (anchor it with ^ and $ for a whole match). The text between the
//     quotes goes to RE2 verbatim: write `"^\d+$"`, not `"^\\d+$"`; a `\"`
//     stands for a quote, as RE2 reads it.
//   - ==, in and ~= are false on an absent source.
//
// For ip, the literals are addresses or CIDR prefixes, IPv4 or IPv6, checked
// at compile time; == and in test whether the client address is, or lies
// inside, one of them. IPv4-mapped IPv6 forms compare as their IPv4 address,
// so "::ffff:1.2.3.4" equals "1.2.3.4". ~= is refused for ip.
//
// Unquoted numbers are literals standing for their own text:
// `query.page == 2` compares with the string "2".
//
// # JSON
//
// Only the first MaxJSONScan bytes of a body are scanned. Within that window
// the document must be valid JSON, or every json source is absent. As in most
// JSON decoders, the last of duplicate keys wins. A string value compares by
// its decoded text (escapes such as \" and \u00e9 resolved; a lone surrogate
// becomes U+FFFD), a number, true, false or null by its literal text, so
// `json.amount == 100` and `json.amount == "100"` are both true for
// {"amount":100}, and false for {"amount":1e2}. Objects and arrays are
// present but equal no literal and match no regex. When a body is longer than
// the window, a value is found only if it ends inside the window, and a
// duplicate key beyond the window is not seen.
package expr

import (
	"net/netip"
	"regexp"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/source"
)

// MaxDepth bounds how deeply parentheses and "!" may nest in an expression.
const MaxDepth = 64

// MaxJSONScan is how much of a JSON body json sources look at (see
// source.MaxJSONScan).
const MaxJSONScan = source.MaxJSONScan

// maxPathSegments bounds the number of segments in a json path.
const maxPathSegments = source.MaxPathSegments

// setThreshold is the list length from which "in" uses a map rather than a
// linear scan.
const setThreshold = 8

// Expr is a compiled condition expression. It is immutable and safe for
// concurrent use; Eval allocates nothing.
type Expr struct {
	src  string
	root node
}

// String returns the source text the expression was compiled from.
func (e *Expr) String() string { return e.src }

// Eval reports whether the request in c satisfies the expression. It reads
// c.Req and c.ClientIP, never consumes a streamed body, and may overwrite
// c.Scratch (to decode escaped values). It allocates nothing in steady state.
func (e *Expr) Eval(c *pipeline.Ctx) bool {
	st := source.NewReader(c)
	return e.root.eval(&st)
}

type opcode uint8

const (
	opTest opcode = iota
	opAnd
	opOr
	opNot
)

type cmpKind uint8

const (
	cmpExists cmpKind = iota
	cmpEq
	cmpNe
	cmpIn
	cmpMatch
)

// node is one node of a compiled expression: a test, or a combination of
// child nodes. And/Or chains are flattened into one node with many kids.
type node struct {
	op   opcode
	kids []node // opAnd, opOr (two or more), opNot (one)

	// opTest:
	src  source.Kind
	cmp  cmpKind
	at   source.Source    // what the test looks up (not ip)
	name string           // query, header, cookie and form key, while parsing
	path []source.Segment // json path, while parsing
	lits []string         // ==, != (one literal), in (one or more)
	set  map[string]struct{}
	re   *regexp.Regexp
	nets []netip.Prefix // ip: == (one), in (one or more)
}

func (n *node) eval(st *source.Reader) bool {
	switch n.op {
	case opAnd:
		for i := range n.kids {
			if !n.kids[i].eval(st) {
				return false
			}
		}
		return true
	case opOr:
		for i := range n.kids {
			if n.kids[i].eval(st) {
				return true
			}
		}
		return false
	case opNot:
		return !n.kids[0].eval(st)
	}
	return n.test(st)
}

func (n *node) test(st *source.Reader) bool {
	if n.src == source.IP {
		return n.testIP(st.ClientIP())
	}
	v, k := st.Value(&n.at)
	switch n.cmp {
	case cmpExists:
		return k != source.Absent
	case cmpEq:
		return k == source.Scalar && string(v) == n.lits[0]
	case cmpNe:
		return k != source.Scalar || string(v) != n.lits[0]
	case cmpIn:
		if k != source.Scalar {
			return false
		}
		if n.set != nil {
			_, ok := n.set[string(v)]
			return ok
		}
		for _, l := range n.lits {
			if string(v) == l {
				return true
			}
		}
		return false
	case cmpMatch:
		return k == source.Scalar && n.re.Match(v)
	}
	return false
}

func (n *node) testIP(a netip.Addr) bool {
	if !a.IsValid() {
		return n.cmp == cmpNe
	}
	a = a.Unmap().WithZone("")
	switch n.cmp {
	case cmpExists:
		return true
	case cmpNe:
		return !n.nets[0].Contains(a)
	}
	for _, p := range n.nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
