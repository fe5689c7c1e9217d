package transcode

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonScanner reads JSON from a byte slice without building values: the
// converter asks for the token it expects next. It accepts what protojson
// accepts (RFC 8259 JSON, UTF-8 only) and nothing more.
type jsonScanner struct {
	in      []byte
	pos     int
	scratch []byte // unescaped string content, reused
}

type syntaxError struct {
	pos int
	msg string
}

func (e *syntaxError) Error() string { return "syntax error: " + e.msg }

// position is the line and column (counted in bytes) of offset pos, for
// error messages.
func position(in []byte, pos int) (line, col int) {
	pos = min(pos, len(in))
	line, col = 1, 1
	for _, c := range in[:pos] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

func (s *jsonScanner) errorf(format string, args ...any) error {
	return &syntaxError{pos: s.pos, msg: fmt.Sprintf(format, args...)}
}

func (s *jsonScanner) reset(in []byte) {
	s.in, s.pos = in, 0
}

// peek skips whitespace and returns the next byte, 0 at the end.
func (s *jsonScanner) peek() byte {
	for s.pos < len(s.in) {
		switch c := s.in[s.pos]; c {
		case ' ', '\n', '\r', '\t':
			s.pos++
		default:
			return c
		}
	}
	return 0
}

func (s *jsonScanner) expect(c byte) error {
	if s.peek() != c {
		return s.unexpected()
	}
	s.pos++
	return nil
}

func (s *jsonScanner) unexpected() error {
	if s.peek(); s.pos >= len(s.in) {
		return s.errorf("unexpected end of input")
	}
	return s.errorf("unexpected %q", s.in[s.pos])
}

// end reports an error unless only whitespace is left.
func (s *jsonScanner) end() error {
	if s.peek(); s.pos < len(s.in) {
		return s.unexpected()
	}
	return nil
}

// more is called after a member or element: it consumes a comma and
// reports true, or consumes the closing byte and reports false.
func (s *jsonScanner) more(closing byte) (bool, error) {
	switch s.peek() {
	case ',':
		s.pos++
		return true, nil
	case closing:
		s.pos++
		return false, nil
	}
	return false, s.unexpected()
}

// isNotDelim are the bytes that may not follow a number or a literal
// (protojson's rule: "truex" and "1x" are not tokens).
func isNotDelim(c byte) bool {
	return c == '-' || c == '+' || c == '.' || c == '_' ||
		('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

// literal consumes "null", "true" or "false" when it is next.
func (s *jsonScanner) literal(lit string) bool {
	s.peek()
	rest := s.in[s.pos:]
	if len(rest) < len(lit) || string(rest[:len(lit)]) != lit {
		return false
	}
	if len(rest) > len(lit) && isNotDelim(rest[len(lit)]) {
		return false
	}
	s.pos += len(lit)
	return true
}

// number consumes a number token and returns its text.
func (s *jsonScanner) number() ([]byte, error) {
	s.peek()
	n, ok := numberLen(s.in[s.pos:])
	if !ok {
		return nil, s.errorf("invalid number")
	}
	b := s.in[s.pos : s.pos+n]
	s.pos += n
	return b, nil
}

// numberLen is protojson's number grammar, including what it lets
// through: an exponent marker without digits ("1e") when a delimiter
// follows.
func numberLen(in []byte) (int, bool) {
	s, n := in, 0
	if len(s) == 0 {
		return 0, false
	}
	if s[0] == '-' {
		s, n = s[1:], n+1
		if len(s) == 0 {
			return 0, false
		}
	}
	switch {
	case s[0] == '0':
		s, n = s[1:], n+1
	case '1' <= s[0] && s[0] <= '9':
		s, n = s[1:], n+1
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s, n = s[1:], n+1
		}
	default:
		return 0, false
	}
	if len(s) >= 2 && s[0] == '.' && '0' <= s[1] && s[1] <= '9' {
		s, n = s[2:], n+2
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s, n = s[1:], n+1
		}
	}
	if len(s) >= 2 && (s[0] == 'e' || s[0] == 'E') {
		s, n = s[1:], n+1
		if s[0] == '+' || s[0] == '-' {
			s, n = s[1:], n+1
			if len(s) == 0 {
				return 0, false
			}
		}
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s, n = s[1:], n+1
		}
	}
	if n < len(in) && isNotDelim(in[n]) {
		return 0, false
	}
	return n, true
}

// str consumes a string and returns its content, unescaped. The slice is
// the input itself when nothing was escaped, else the scanner's scratch,
// valid until the next call.
func (s *jsonScanner) str() ([]byte, error) {
	if s.peek() != '"' {
		return nil, s.unexpected()
	}
	s.pos++
	start := s.pos
	// The fast path: no escapes, ASCII or valid UTF-8.
	for s.pos < len(s.in) {
		c := s.in[s.pos]
		switch {
		case c == '"':
			b := s.in[start:s.pos]
			s.pos++
			return b, nil
		case c == '\\' || c < ' ' || c >= utf8.RuneSelf:
			return s.strSlow(start)
		}
		s.pos++
	}
	return nil, s.errorf("unexpected end of input in a string")
}

func (s *jsonScanner) strSlow(start int) ([]byte, error) {
	out := append(s.scratch[:0], s.in[start:s.pos]...)
	defer func() { s.scratch = out[:0] }()
	for s.pos < len(s.in) {
		c := s.in[s.pos]
		switch {
		case c == '"':
			s.pos++
			return out, nil
		case c < ' ':
			return nil, s.errorf("control character in a string")
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(s.in[s.pos:])
			if r == utf8.RuneError && n == 1 {
				return nil, s.errorf("invalid UTF-8 in a string")
			}
			out = append(out, s.in[s.pos:s.pos+n]...)
			s.pos += n
		case c == '\\':
			if s.pos+1 >= len(s.in) {
				return nil, s.errorf("unexpected end of input in a string")
			}
			e := s.in[s.pos+1]
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, n, err := s.unicodeEscape()
				if err != nil {
					return nil, err
				}
				out = utf8.AppendRune(out, r)
				s.pos += n
				continue
			default:
				return nil, s.errorf("invalid escape %q", e)
			}
			s.pos += 2
		default:
			out = append(out, c)
			s.pos++
		}
	}
	return nil, s.errorf("unexpected end of input in a string")
}

// unicodeEscape reads \uXXXX (and its low half when XXXX is a high
// surrogate) at s.pos; it returns the rune and the bytes read.
func (s *jsonScanner) unicodeEscape() (rune, int, error) {
	in := s.in[s.pos:]
	r, ok := hex4(in)
	if !ok {
		return 0, 0, s.errorf("invalid \\u escape")
	}
	if !utf16.IsSurrogate(r) {
		return r, 6, nil
	}
	if len(in) < 12 || in[6] != '\\' || in[7] != 'u' {
		return 0, 0, s.errorf("invalid surrogate pair")
	}
	lo, ok := hex4(in[6:])
	r = utf16.DecodeRune(r, lo)
	if !ok || r == utf8.RuneError {
		return 0, 0, s.errorf("invalid surrogate pair")
	}
	return r, 12, nil
}

func hex4(in []byte) (rune, bool) {
	if len(in) < 6 {
		return 0, false
	}
	var r rune
	for _, c := range in[2:6] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
