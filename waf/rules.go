package waf

// Rules for attacks libinjection's detectors do not flag on their own,
// measured against testdata/payloads.txt and testdata/benign.txt (see
// TestCorpus): a value that is a script URL, a tautology appended to a
// value ("1 or true"), and a closed quote followed by a comment or a
// stacked statement ("admin' #", "'; shutdown--"). Each is a byte scan,
// allocation-free, anchored on shapes prose does not take.

// scriptURL reports a value a browser would run as script when used as a
// link or a source: javascript: or vbscript: followed by code, or a
// data: URL of HTML or SVG. The scheme is read as a browser reads it:
// leading blanks and control characters dropped, tabs and newlines inside
// ignored, letters in any case, HTML character references (&#106;,
// &#x6A;, &colon;) decoded. "JavaScript: The Good Parts" is not code.
func scriptURL(v []byte) bool {
	i := 0
	for i < len(v) && v[i] <= ' ' {
		i++
	}
	r := urlReader{b: v, i: i}
	var scheme [10]byte
	n := 0
	for {
		c, ok := r.next()
		if !ok || c == ':' {
			if !ok {
				return false
			}
			break
		}
		if n == len(scheme) {
			return false
		}
		scheme[n] = c | 0x20
		n++
	}
	switch string(scheme[:n]) {
	case "javascript", "vbscript":
		return callsCode(&r)
	case "data":
		for _, t := range [...]string{"text/html", "image/svg+xml", "application/xhtml"} {
			if r.hasPrefixFold(t) {
				return true
			}
		}
	}
	return false
}

// callsCode reports script that calls or assigns: after blanks and
// comments, a name (dots, brackets, quotes allowed) followed by '(', '`'
// or '='.
func callsCode(r *urlReader) bool {
	for {
		c, ok := r.next()
		if !ok {
			return false
		}
		switch {
		case c <= ' ':
			continue
		case c == '/' && r.peek() == '/':
			// The script is percent-decoded before it runs: "%0a" ends the
			// comment as a raw newline would in the source.
			if r.i = lineEnd(r.b, r.i); r.i < 0 {
				return false
			}
			continue
		case c == '/' && r.peek() == '*':
			r.next()
			for prev := byte(0); !(prev == '*' && c == '/'); {
				prev = c
				if c, ok = r.next(); !ok {
					return false
				}
			}
			continue
		}
		for {
			switch {
			case c == '(' || c == '`' || c == '=':
				return true
			case isWordByte(c) || c == '.' || c == '[' || c == ']' || c == '\'' || c == '"' || c == '$':
			case c <= ' ':
				for c <= ' ' {
					if c, ok = r.next(); !ok {
						return false
					}
				}
				return c == '(' || c == '`' || c == '='
			default:
				return false
			}
			if c, ok = r.next(); !ok {
				return false
			}
		}
	}
}

// lineEnd returns the index just past the first line break at or after
// i (a raw CR or LF, or %0a / %0d), or -1.
func lineEnd(b []byte, i int) int {
	for ; i < len(b); i++ {
		switch {
		case b[i] == '\n' || b[i] == '\r':
			return i + 1
		case b[i] == '%' && i+2 < len(b) && b[i+1] == '0' && (b[i+2]|0x20 == 'a' || b[i+2]|0x20 == 'd'):
			return i + 3
		}
	}
	return -1
}

// urlReader yields the bytes of a value as a browser's URL parser sees
// them in an attribute: tabs, CR and LF removed, numeric and a few named
// character references decoded (to ASCII; others stay as written).
type urlReader struct {
	b []byte
	i int
}

func (r *urlReader) next() (byte, bool) {
	for r.i < len(r.b) {
		c := r.b[r.i]
		r.i++
		switch c {
		case '\t', '\n', '\r':
			continue
		case '&':
			if d, n := charRef(r.b[r.i:]); n > 0 {
				r.i += n
				if d == '\t' || d == '\n' || d == '\r' {
					continue
				}
				return d, true
			}
		}
		return c, true
	}
	return 0, false
}

func (r *urlReader) peek() byte {
	save := r.i
	c, _ := r.next()
	r.i = save
	return c
}

func (r *urlReader) hasPrefixFold(s string) bool {
	save := r.i
	defer func() { r.i = save }()
	for k := 0; k < len(s); k++ {
		c, ok := r.next()
		if !ok || c|0x20 != s[k] && c != s[k] {
			return false
		}
	}
	return true
}

// charRef decodes the character reference after an '&' (b starts past
// it): "#106;", "#x6a;", "colon;", "Tab;", "NewLine;". It returns the
// ASCII byte and how many bytes it took, or n == 0. The ';' may be left
// out after a numeric reference, as browsers accept.
func charRef(b []byte) (byte, int) {
	for _, named := range [...]struct {
		name string
		c    byte
	}{{"colon;", ':'}, {"tab;", '\t'}, {"newline;", '\n'}, {"lpar;", '('}, {"rpar;", ')'}} {
		if len(b) >= len(named.name) && equalFold(b[:len(named.name)], named.name) {
			return named.c, len(named.name)
		}
	}
	if len(b) < 2 || b[0] != '#' {
		return 0, 0
	}
	i, base := 1, 10
	if b[1]|0x20 == 'x' {
		i, base = 2, 16
	}
	start, v := i, 0
	for ; i < len(b) && i-start < 8; i++ {
		d := digitVal(b[i], base)
		if d < 0 {
			break
		}
		v = v*base + d
	}
	if i == start || v == 0 || v > 0x7f {
		return 0, 0
	}
	if i < len(b) && b[i] == ';' {
		i++
	}
	return byte(v), i
}

func digitVal(c byte, base int) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case base == 16 && 'a' <= c|0x20 && c|0x20 <= 'f':
		return int(c|0x20-'a') + 10
	}
	return -1
}

func equalFold(b []byte, lower string) bool {
	for k := range b {
		if b[k]|0x20 != lower[k] && b[k] != lower[k] {
			return false
		}
	}
	return true
}

func isWordByte(c byte) bool {
	return 'a' <= c|0x20 && c|0x20 <= 'z' || '0' <= c && c <= '9' || c == '_'
}

// tautology reports a value that ends a string or number and appends an
// always-true OR: "1 or true", "0 or 1", "' or true #", "1' || 1=1--".
// What precedes the OR is one number, or ends with a quote or ')' (the
// end of the backend's own string or group); what follows is true, false
// or a number, optionally compared with another, then only a comment or
// the end. "Is it true or false that…" and "x = 3 or x = 4" are prose.
func tautology(v []byte) bool {
	for i := 0; i < len(v); i++ {
		var after int
		switch {
		case (v[i]|0x20 == 'o' && i+1 < len(v) && v[i+1]|0x20 == 'r'), v[i] == '|' && i+1 < len(v) && v[i+1] == '|':
			after = i + 2
		default:
			continue
		}
		if v[i] != '|' && (i > 0 && isWordByte(v[i-1]) || after < len(v) && isWordByte(v[after])) {
			continue // a word containing "or"
		}
		if tautologyBefore(v[:i]) && tautologyAfter(v[after:]) {
			return true
		}
	}
	return false
}

func tautologyBefore(b []byte) bool {
	b = trimBlanks(b)
	if len(b) == 0 {
		return false
	}
	if last := b[len(b)-1]; last == '\'' || last == '"' || last == ')' {
		return true
	}
	if b[0] == '-' {
		b = b[1:]
	}
	return len(b) > 0 && allDigits(b)
}

func tautologyAfter(b []byte) bool {
	i := skipBlanks(b, 0)
	j := i
	for j < len(b) && isWordByte(b[j]) {
		j++
	}
	word := b[i:j]
	if !(equalFold(word, "true") && len(word) == 4 || equalFold(word, "false") && len(word) == 5 || len(word) > 0 && allDigits(word)) {
		return false
	}
	i = skipBlanks(b, j)
	if i < len(b) && (b[i] == '=' || b[i] == '<' || b[i] == '>') {
		for i < len(b) && (b[i] == '=' || b[i] == '<' || b[i] == '>') {
			i++
		}
		i = skipBlanks(b, i)
		j = i
		for j < len(b) && isWordByte(b[j]) {
			j++
		}
		if j == i {
			return false
		}
		i = skipBlanks(b, j)
	}
	return i == len(b) || commentAt(b, i)
}

// quoteComment reports a closed quote followed, after blanks, ';' or ')',
// by an empty comment that runs to the end ("admin' #", "admin'-- -"),
// or by ';' and a statement ("'; shutdown--"): the rest of the backend's
// query cut off or a second one run. "'#ff0000'" is a quoted colour.
func quoteComment(v []byte) bool {
	for q := 0; q < len(v); q++ {
		if v[q] != '\'' && v[q] != '"' {
			continue
		}
		i, semi := q+1, false
		for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == ';' || v[i] == ')') {
			semi = semi || v[i] == ';'
			i++
		}
		if i < len(v) && commentAt(v, i) {
			n := 1
			if v[i] == '-' || v[i] == '/' {
				n = 2
			}
			if emptyComment(v[i+n:]) {
				return true
			}
		}
		if semi && statementAt(v[i:]) {
			return true
		}
	}
	return false
}

// emptyComment reports the rest of a comment holding no words: prose
// after a dash ("'the usual' -- don't ask") is not a cut-off query.
func emptyComment(b []byte) bool {
	for _, c := range b {
		if isWordByte(c) || c >= 0x80 {
			return false
		}
	}
	return true
}

func commentAt(b []byte, i int) bool {
	return b[i] == '#' || i+1 < len(b) && (b[i] == '-' && b[i+1] == '-' || b[i] == '/' && b[i+1] == '*')
}

// statementAt reports b starting with a statement keyword a stacked query
// runs.
func statementAt(b []byte) bool {
	j := 0
	for j < len(b) && isWordByte(b[j]) {
		j++
	}
	if j == len(b) || j == 0 {
		return false
	}
	w := b[:j]
	for _, k := range [...]string{"shutdown", "drop", "delete", "update", "insert", "exec", "execute", "select", "declare", "truncate", "alter", "create", "grant", "waitfor"} {
		if len(w) == len(k) && equalFold(w, k) {
			return true
		}
	}
	return false
}

func trimBlanks(b []byte) []byte {
	for len(b) > 0 && b[0] <= ' ' {
		b = b[1:]
	}
	for len(b) > 0 && b[len(b)-1] <= ' ' {
		b = b[:len(b)-1]
	}
	return b
}

func skipBlanks(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' {
		i++
	}
	return i
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// arithmetic reports a value libinjection reads as number-AND-number
// (fingerprint "1&1") whose left side is itself a comparison with < or >:
// "5 > 3 and 2 < 4" is arithmetic, "1 AND 1=1" appends to a value.
func arithmetic(v []byte, fingerprint string) bool {
	if fingerprint != "1&1" {
		return false
	}
	for _, c := range v {
		switch {
		case c == '<' || c == '>':
			return true
		case isWordByte(c) && c > '9':
			return false // reached the AND/OR word first
		}
	}
	return false
}
