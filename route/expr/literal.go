package expr

import (
	"net/netip"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tollgate/tollgate/internal/ascii"
)

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
