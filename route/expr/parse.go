package expr

import (
	"errors"
	"net/netip"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tollgate/tollgate/internal/ascii"
	"github.com/tollgate/tollgate/source"
)

// SyntaxError is a compile error with its position in the expression.
type SyntaxError struct {
	Pos   int    // byte offset of the offending token, 0-based
	Col   int    // character column of the offending token, 1-based; newlines count as characters
	Token string // the offending token; "" at the end of the expression
	Msg   string // what was wrong or what was expected

	// bad says the token is recognized but its content is wrong (a bad
	// regex, CIDR or name) rather than out of place.
	bad bool
}

func (e *SyntaxError) Error() string {
	var b strings.Builder
	b.WriteString("col ")
	b.WriteString(strconv.Itoa(e.Col))
	b.WriteString(": ")
	switch {
	case e.bad:
		b.WriteString(strconv.Quote(shorten(e.Token)))
	case e.Token == "":
		b.WriteString("unexpected end of expression")
	default:
		b.WriteString("unexpected ")
		b.WriteString(strconv.Quote(shorten(e.Token)))
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// shorten trims a long token for a message, at a character boundary.
func shorten(s string) string {
	const max = 40
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// Compile parses and checks an expression: names, literals, addresses and
// CIDRs, and regexes (compiled here, once). Errors are *SyntaxError, with the
// position of the offending token.
func Compile(src string) (*Expr, error) {
	p := parser{src: src}
	p.space()
	if p.pos == len(src) {
		return nil, p.unexpected(p.pos, "expected a condition")
	}
	root, err := p.or()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.pos < len(src) {
		msg := "expected && or ||"
		if p.lastBare {
			msg = "expected ==, !=, ~=, in, && or ||"
		}
		switch c := src[p.pos]; {
		case c == ')':
			msg = "no ( to close"
		case c == '&' || c == '|':
			msg = "did you mean " + didYouMean(c) + "?"
		}
		return nil, p.unexpected(p.pos, msg)
	}
	return &Expr{src: src, root: root}, nil
}

type parser struct {
	src      string
	pos      int
	depth    int
	lastBare bool // the last test parsed was a bare source
}

func (p *parser) errAt(pos int, tok string, bad bool, msg string) *SyntaxError {
	return &SyntaxError{
		Pos:   pos,
		Col:   utf8.RuneCountInString(p.src[:pos]) + 1,
		Token: tok,
		Msg:   msg,
		bad:   bad,
	}
}

// unexpected reports the token at pos (after any spaces) as out of place.
func (p *parser) unexpected(pos int, msg string) error {
	for pos < len(p.src) && isSpace(p.src[pos]) {
		pos++
	}
	return p.errAt(pos, tokenAt(p.src, pos), false, msg)
}

// invalid reports src[pos:end] as a token with wrong content.
func (p *parser) invalid(pos, end int, msg string) error {
	return p.errAt(pos, p.src[pos:end], true, msg)
}

func (p *parser) space() {
	for p.pos < len(p.src) && isSpace(p.src[p.pos]) {
		p.pos++
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// nest enters one level of ! or ( at p.pos, consuming it, or refuses
// nesting deeper than MaxDepth.
func (p *parser) nest() error {
	if p.depth == MaxDepth {
		return p.unexpected(p.pos, "nesting deeper than "+strconv.Itoa(MaxDepth))
	}
	p.depth++
	p.pos++
	return nil
}

// peek2 reports whether the next two bytes are op.
func (p *parser) peek2(op string) bool {
	return strings.HasPrefix(p.src[p.pos:], op)
}

func (p *parser) or() (node, error) { return p.chain(opOr, "||", p.and) }

func (p *parser) and() (node, error) { return p.chain(opAnd, "&&", p.unary) }

// chain parses operand (tok operand)* into one flat node of op, or the
// single operand when there is no tok.
func (p *parser) chain(op opcode, tok string, operand func() (node, error)) (node, error) {
	first, err := operand()
	if err != nil {
		return node{}, err
	}
	var kids []node
	for {
		p.space()
		if !p.peek2(tok) {
			break
		}
		p.pos += 2
		next, err := operand()
		if err != nil {
			return node{}, err
		}
		if kids == nil {
			kids = appendFlat(kids, op, first)
		}
		kids = appendFlat(kids, op, next)
	}
	if kids == nil {
		return first, nil
	}
	return node{op: op, kids: kids}, nil
}

// appendFlat appends n to kids of an op node, inlining n's own kids when n is
// the same operation (from parentheses), which keeps evaluation shallow.
func appendFlat(kids []node, op opcode, n node) []node {
	if n.op == op {
		return append(kids, n.kids...)
	}
	return append(kids, n)
}

func (p *parser) unary() (node, error) {
	p.space()
	if p.pos == len(p.src) {
		return node{}, p.unexpected(p.pos, "expected a condition")
	}
	switch c := p.src[p.pos]; {
	case c == '!' && !p.peek2("!="):
		if err := p.nest(); err != nil {
			return node{}, err
		}
		k, err := p.unary()
		if err != nil {
			return node{}, err
		}
		p.depth--
		p.lastBare = false
		if k.op == opNot { // !!x is x
			return k.kids[0], nil
		}
		return node{op: opNot, kids: []node{k}}, nil
	case c == '(':
		start := p.pos
		if err := p.nest(); err != nil {
			return node{}, err
		}
		n, err := p.or()
		if err != nil {
			return node{}, err
		}
		p.space()
		if p.pos == len(p.src) || p.src[p.pos] != ')' {
			msg := "expected ) to close the ( at col " + strconv.Itoa(utf8.RuneCountInString(p.src[:start])+1)
			switch {
			case p.lastBare:
				msg = "expected ==, !=, ~=, in, &&, || or )"
			case p.pos < len(p.src) && (p.src[p.pos] == '&' || p.src[p.pos] == '|'):
				msg = "did you mean " + didYouMean(p.src[p.pos]) + "?"
			}
			return node{}, p.unexpected(p.pos, msg)
		}
		p.pos++
		p.depth--
		p.lastBare = false
		return n, nil
	case isWordStart(c):
		return p.test()
	}
	return node{}, p.unexpected(p.pos, "expected a condition: a source (query., header., cookie., form., json., ip), ! or (")
}

var sourceNames = map[string]source.Kind{
	"query":  source.Query,
	"header": source.Header,
	"cookie": source.Cookie,
	"form":   source.Form,
	"json":   source.JSON,
	"ip":     source.IP,
}

const sourceList = "query., header., cookie., form., json. or ip"

func (p *parser) test() (node, error) {
	start := p.pos
	for p.pos < len(p.src) && isWordChar(p.src[p.pos]) {
		p.pos++
	}
	word := p.src[start:p.pos]
	kind, ok := sourceNames[word]
	if !ok {
		end := p.pos
		for end < len(p.src) && isNameChar(p.src[end]) {
			end++
		}
		return node{}, p.invalid(start, end, "unknown source; expected "+sourceList)
	}
	n := node{op: opTest, src: kind}
	if kind == source.IP {
		if p.pos < len(p.src) && p.src[p.pos] == '.' {
			end := p.pos
			for end < len(p.src) && isNameChar(p.src[end]) {
				end++
			}
			return node{}, p.invalid(start, end, "ip takes no name")
		}
	} else {
		if p.pos == len(p.src) || p.src[p.pos] != '.' {
			return node{}, p.unexpected(p.pos, "expected . and a name after "+word)
		}
		p.pos++
		var err error
		if kind == source.JSON {
			err = p.jsonPath(&n)
		} else {
			err = p.name(&n, word)
		}
		if err != nil {
			return node{}, err
		}
		if kind == source.JSON {
			n.at = source.NewJSON(n.path)
		} else {
			n.at = source.New(kind, n.name)
		}
	}
	return p.comparison(n)
}

// name parses the key of a query, header, cookie or form source.
func (p *parser) name(n *node, word string) error {
	start := p.pos
	if p.pos < len(p.src) && p.src[p.pos] == '"' {
		s, err := p.str()
		if err != nil {
			return err
		}
		n.name = s
	} else {
		for p.pos < len(p.src) && isNameChar(p.src[p.pos]) {
			p.pos++
		}
		n.name = p.src[start:p.pos]
	}
	if n.name == "" {
		return p.unexpected(start, "expected a name after "+word+".")
	}
	if n.src == source.Header {
		for i := 0; i < len(n.name); i++ {
			if !isTokenChar(n.name[i]) {
				return p.invalid(start, p.pos, "not a valid header name")
			}
		}
	}
	return nil
}

func (p *parser) jsonPath(n *node) error {
	for {
		start := p.pos
		var key string
		if p.pos < len(p.src) && p.src[p.pos] == '"' {
			s, err := p.str()
			if err != nil {
				return err
			}
			if s == "" {
				return p.invalid(start, p.pos, "empty path segment")
			}
			key = s
		} else {
			for p.pos < len(p.src) && isNameChar(p.src[p.pos]) && p.src[p.pos] != '.' {
				p.pos++
			}
			key = p.src[start:p.pos]
			if key == "" {
				return p.unexpected(start, "expected a path segment after .")
			}
		}
		if len(n.path) == maxPathSegments {
			return p.invalid(start, p.pos, "json path longer than "+strconv.Itoa(maxPathSegments)+" segments")
		}
		n.path = append(n.path, source.Segment{Key: key, Index: source.ArrayIndex(key)})
		if p.pos == len(p.src) || p.src[p.pos] != '.' {
			return nil
		}
		p.pos++
	}
}

// comparison parses what follows a source: an operator and its operand, or
// nothing (an existence test).
func (p *parser) comparison(n node) (node, error) {
	p.space()
	p.lastBare = false
	opPos := p.pos
	rest := p.src[p.pos:]
	switch {
	case strings.HasPrefix(rest, "=="), strings.HasPrefix(rest, "!="):
		if rest[0] == '=' {
			n.cmp = cmpEq
		} else {
			n.cmp = cmpNe
		}
		p.pos += 2
		v, vpos, err := p.value(rest[:2])
		if err != nil {
			return node{}, err
		}
		if n.src == source.IP {
			pf, err := p.ipLiteral(v, vpos)
			if err != nil {
				return node{}, err
			}
			n.nets = []netip.Prefix{pf}
			return n, nil
		}
		n.lits = []string{v}
		return n, nil
	case strings.HasPrefix(rest, "~="):
		if n.src == source.IP {
			return node{}, p.unexpected(opPos, "ip cannot be matched with a regex; use == or in with addresses and CIDRs")
		}
		p.pos += 2
		p.space()
		start := p.pos
		if p.pos == len(p.src) || p.src[p.pos] != '"' {
			return node{}, p.unexpected(p.pos, "expected a quoted regex after ~=")
		}
		pat, err := p.regexStr()
		if err != nil {
			return node{}, err
		}
		re, err := regexp.Compile(pat)
		if err != nil {
			msg := err.Error()
			var se *syntax.Error
			if errors.As(err, &se) {
				msg = string(se.Code)
				if se.Expr != "" && se.Expr != pat {
					msg += ": `" + se.Expr + "`"
				}
			}
			return node{}, p.invalid(start, p.pos, "invalid regex: "+msg)
		}
		n.cmp, n.re = cmpMatch, re
		return n, nil
	case strings.HasPrefix(rest, "in") && (len(rest) == 2 || !isNameChar(rest[2])):
		p.pos += 2
		return p.list(n)
	case strings.HasPrefix(rest, "=") || strings.HasPrefix(rest, "&") && !strings.HasPrefix(rest, "&&") ||
		strings.HasPrefix(rest, "|") && !strings.HasPrefix(rest, "||") || strings.HasPrefix(rest, "~"):
		return node{}, p.unexpected(opPos, "did you mean "+didYouMean(rest[0])+"?")
	}
	n.cmp = cmpExists
	p.lastBare = true
	return n, nil
}

func didYouMean(c byte) string {
	switch c {
	case '=':
		return "=="
	case '&':
		return "&&"
	case '|':
		return "||"
	}
	return "~="
}

func (p *parser) list(n node) (node, error) {
	p.space()
	if p.pos == len(p.src) || p.src[p.pos] != '[' {
		return node{}, p.unexpected(p.pos, "expected [ after in")
	}
	p.pos++
	n.cmp = cmpIn
	for {
		p.space()
		if p.pos < len(p.src) && p.src[p.pos] == ']' && len(n.lits)+len(n.nets) == 0 {
			return node{}, p.unexpected(p.pos, "empty list")
		}
		v, vpos, err := p.value("[ or ,")
		if err != nil {
			return node{}, err
		}
		if n.src == source.IP {
			pf, err := p.ipLiteral(v, vpos)
			if err != nil {
				return node{}, err
			}
			n.nets = append(n.nets, pf)
		} else {
			n.lits = append(n.lits, v)
		}
		p.space()
		if p.pos < len(p.src) && p.src[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.src) && p.src[p.pos] == ']' {
			p.pos++
			break
		}
		return node{}, p.unexpected(p.pos, "expected , or ] in the list")
	}
	if len(n.lits) >= setThreshold {
		n.set = make(map[string]struct{}, len(n.lits))
		for _, l := range n.lits {
			n.set[l] = struct{}{}
		}
	}
	return n, nil
}

// value parses a literal operand: a string or an unquoted number. It returns
// the literal's text and where it starts.
func (p *parser) value(after string) (string, int, error) {
	p.space()
	start := p.pos
	if p.pos == len(p.src) {
		return "", start, p.unexpected(start, "expected a value after "+after)
	}
	c := p.src[p.pos]
	if c == '"' {
		s, err := p.str()
		return s, start, err
	}
	if c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9') {
		end := p.pos
		for end < len(p.src) && (isNameChar(p.src[end]) || p.src[end] == '+' || p.src[end] == '/') {
			end++
		}
		tok := p.src[start:end]
		if !isNumber(tok) {
			return "", start, p.invalid(start, end, "not a number; quote strings, addresses and CIDRs")
		}
		p.pos = end
		return tok, start, nil
	}
	return "", start, p.unexpected(start, "expected a value after "+after)
}

// isNumber reports whether s is a JSON number.
func isNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i == len(s) || !isDigit(s[i]) {
			return false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i == len(s) || !isDigit(s[i]) {
			return false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	return i == len(s)
}

// ipLiteral parses an address or CIDR operand of an ip test into a prefix
// (an address is a full-length prefix), IPv4-mapped forms unmapped.
func (p *parser) ipLiteral(v string, pos int) (netip.Prefix, error) {
	end := p.pos
	if strings.Contains(v, "/") {
		pf, err := netip.ParsePrefix(v)
		if err != nil {
			return netip.Prefix{}, p.invalid(pos, end, "not a CIDR prefix")
		}
		a, bits := pf.Addr(), pf.Bits()
		if a.Is4In6() {
			if bits < 96 {
				return netip.Prefix{}, p.invalid(pos, end, "an IPv4-mapped prefix must be /96 or longer")
			}
			a, bits = a.Unmap(), bits-96
		}
		return netip.PrefixFrom(a, bits).Masked(), nil
	}
	a, err := netip.ParseAddr(v)
	if err != nil {
		return netip.Prefix{}, p.invalid(pos, end, "not an IP address or CIDR prefix")
	}
	a = a.Unmap().WithZone("")
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// str parses a double-quoted string with JSON-style escapes at p.pos.
func (p *parser) str() (string, error) {
	start := p.pos
	i := start + 1
	var b []byte // allocated only when the string has escapes
	from := i
	for {
		if i >= len(p.src) || p.src[i] == '\n' || p.src[i] == '\r' {
			return "", p.invalid(start, i, "unterminated string")
		}
		c := p.src[i]
		if c == '"' {
			var s string
			if b == nil {
				s = p.src[from:i]
			} else {
				s = string(append(b, p.src[from:i]...))
			}
			p.pos = i + 1
			return s, nil
		}
		if c != '\\' {
			i++
			continue
		}
		b = append(b, p.src[from:i]...)
		if i+1 >= len(p.src) {
			return "", p.invalid(start, i, "unterminated string")
		}
		esc := p.src[i+1]
		switch esc {
		case '"', '\\', '/':
			b = append(b, esc)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, n := parseU(p.src[i:])
			if n == 0 {
				end := min(i+6, len(p.src))
				return "", p.invalid(i, end, `bad \u escape: want \uXXXX with four hex digits, surrogates in pairs`)
			}
			b = utf8.AppendRune(b, r)
			i += n
			from = i
			continue
		default:
			_, size := utf8.DecodeRuneInString(p.src[i+1:])
			return "", p.invalid(i, i+1+size, `unknown escape; strings allow \" \\ \/ \b \f \n \r \t \uXXXX`)
		}
		i += 2
		from = i
	}
}

// parseU decodes s = `\uXXXX` (or a `\uD8XX\uDCXX` surrogate pair) and
// returns the rune and the bytes used, or 0 bytes when it is malformed.
func parseU(s string) (rune, int) {
	r, ok := hex4(s, 2)
	if !ok {
		return 0, 0
	}
	if !utf16.IsSurrogate(r) {
		return r, 6
	}
	if len(s) < 12 || s[6] != '\\' || s[7] != 'u' {
		return 0, 0
	}
	r2, ok := hex4(s, 8)
	if !ok {
		return 0, 0
	}
	d := utf16.DecodeRune(r, r2)
	if d == utf8.RuneError {
		return 0, 0
	}
	return d, 12
}

func hex4(s string, at int) (rune, bool) {
	if len(s) < at+4 {
		return 0, false
	}
	var r rune
	for i := at; i < at+4; i++ {
		h := ascii.Unhex(s[i])
		if h < 0 {
			return 0, false
		}
		r = r<<4 | rune(h)
	}
	return r, true
}

// regexStr parses a double-quoted regex at p.pos. Its content goes to RE2
// verbatim; a backslash only keeps the next character from ending it.
func (p *parser) regexStr() (string, error) {
	start := p.pos
	for i := start + 1; ; i++ {
		if i >= len(p.src) || p.src[i] == '\n' || p.src[i] == '\r' {
			return "", p.invalid(start, i, "unterminated regex")
		}
		switch p.src[i] {
		case '\\':
			i++
			if i >= len(p.src) || p.src[i] == '\n' || p.src[i] == '\r' {
				return "", p.invalid(start, min(i, len(p.src)), "unterminated regex")
			}
		case '"':
			p.pos = i + 1
			return p.src[start+1 : i], nil
		}
	}
}

// tokenAt returns the token starting at pos, for error messages.
func tokenAt(src string, pos int) string {
	if pos >= len(src) {
		return ""
	}
	rest := src[pos:]
	for _, op := range [...]string{"&&", "||", "==", "!=", "~="} {
		if strings.HasPrefix(rest, op) {
			return op
		}
	}
	c := rest[0]
	switch {
	case c == '"':
		for i := 1; i < len(rest); i++ {
			switch rest[i] {
			case '\\':
				i++
			case '"':
				return rest[:i+1]
			case '\n', '\r':
				return rest[:i]
			}
		}
		return rest
	case isNameChar(c):
		i := 1
		for i < len(rest) && isNameChar(rest[i]) {
			i++
		}
		return rest[:i]
	}
	_, size := utf8.DecodeRuneInString(rest)
	return rest[:size]
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isWordStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

func isWordChar(c byte) bool { return isWordStart(c) || isDigit(c) }

// isNameChar reports whether c may appear in a bare name.
func isNameChar(c byte) bool {
	return isWordChar(c) || c == '-' || c == '.' || c == '$' || c == '@' || c == ':'
}

// isTokenChar reports whether c is an RFC 9110 tchar (a header name byte).
func isTokenChar(c byte) bool {
	if isWordChar(c) {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^`|~", c) >= 0
}
