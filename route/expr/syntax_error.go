package expr

import (
	"strconv"
	"strings"
	"unicode/utf8"
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
