package expr

import (
	"errors"
	"net/netip"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tollgate/tollgate/source"
)

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
