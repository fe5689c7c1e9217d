package waf

import (
	"bytes"

	"github.com/tollgate/tollgate/internal/ascii"
)

// Detectors of our own, for what libinjection lets through that matters
// at an edge (measured on testdata/, bench/RESULTS.md "WAF corpus"): a
// value that is a script URL, a <script tag its parser lost in nesting, a
// tautology with a bare boolean ("1 or true"), a quote that ends a string
// before a comment or a second statement ("admin' #", "'; SHUTDOWN--").
// Each reads the value once, allocates nothing, and is written so that
// prose with the same words passes ("true or false", "it's #1").

// scriptURL reports a value that is a javascript:, vbscript: or
// livescript: URL, or a data: URL of HTML or SVG: what a backend that
// puts the value in an href or src hands a browser to run. Browsers skip
// leading spaces and control bytes and drop tabs and line breaks inside
// the scheme, so the check does too.
func scriptURL(v []byte) bool {
	i := 0
	for i < len(v) && v[i] <= ' ' {
		i++
	}
	var scheme [16]byte
	n := 0
	for ; i < len(v) && n < len(scheme); i++ {
		b := v[i]
		switch {
		case b == '\t' || b == '\n' || b == '\r':
			continue
		case 'a' <= b|0x20 && b|0x20 <= 'z':
			scheme[n] = b | 0x20
			n++
			continue
		case b == ':':
		default:
			return false
		}
		break
	}
	if i >= len(v) || v[i] != ':' {
		return false
	}
	switch string(scheme[:n]) {
	case "javascript", "vbscript", "livescript":
		return true
	case "data":
		rest := ascii.TrimOWS(v[i+1:])
		return ascii.HasPrefixFold(rest, "text/html") || ascii.HasPrefixFold(rest, "image/svg+xml") ||
			ascii.HasPrefixFold(rest, "application/xhtml")
	}
	return false
}

// scriptTag reports "<script" anywhere in the value, whatever else
// surrounds it: "<scr<script>ipt>" leaves one behind once a filter strips
// the inner tag, and libinjection's parser loses it in the nesting.
func scriptTag(v []byte) bool {
	for i := bytes.IndexByte(v, '<'); i >= 0; {
		if ascii.HasPrefixFold(v[i:], "<script") {
			return true
		}
		j := bytes.IndexByte(v[i+1:], '<')
		if j < 0 {
			return false
		}
		i += 1 + j
	}
	return false
}

// sqlExtra reports the SQL shapes libinjection misses: a bare boolean
// tautology after a literal ("1 or true", "x' || true --"), and a quote
// closing a string before a comment or a second statement ("admin' #",
// "'; SHUTDOWN--").
func sqlExtra(v []byte) bool {
	return quoteBreak(v) || boolTautology(v)
}

// quoteBreak reports a quote followed by a comment (# or /*) or by ';'
// and a statement keyword: the string the value was put in is closed and
// the rest of the query cut off or added to. A quote inside a word
// ("it's #1") is prose: the quote must follow a word's end and be
// followed, after spaces, by the comment.
func quoteBreak(v []byte) bool {
	for i := 0; i < len(v); i++ {
		if v[i] != '\'' && v[i] != '"' {
			continue
		}
		j := i + 1
		for j < len(v) && (v[j] == ' ' || v[j] == '\t') {
			j++
		}
		if j == len(v) {
			return false
		}
		switch {
		case v[j] == '#' && (j+1 == len(v) || v[j+1] <= ' '):
			return true
		case v[j] == '/' && j+1 < len(v) && v[j+1] == '*':
			return true
		case v[j] == ')' || v[j] == ';':
			k := j + 1
			for k < len(v) && (v[k] == ' ' || v[k] == '\t' || v[k] == ')' || v[k] == ';') {
				k++
			}
			if statementKeyword(v[k:]) {
				return true
			}
		}
	}
	return false
}

// statementKeywords begin a second statement after a closed string.
var statementKeywords = []string{"select", "insert", "update", "delete", "drop", "shutdown", "exec", "execute",
	"declare", "create", "alter", "truncate", "waitfor", "union", "grant", "revoke", "merge", "call"}

func statementKeyword(v []byte) bool {
	for _, k := range statementKeywords {
		if ascii.HasPrefixFold(v, k) && (len(v) == len(k) || !wordByte(v[len(k)])) {
			return true
		}
	}
	return false
}

func wordByte(b byte) bool {
	return 'a' <= b|0x20 && b|0x20 <= 'z' || '0' <= b && b <= '9' || b == '_'
}

// boolTautology reports "LITERAL or true" (or "|| true", "or not false"):
// a literal (a number, a word, a quoted string, with a closing quote or
// parenthesis), an or, and a bare boolean that ends the value or is
// followed by a comment. "true or false" and "cats or true love" are
// prose: the boolean must come after the or and end the condition.
func boolTautology(v []byte) bool {
	i := skipSpace(v, 0)
	start := i
	for i < len(v) && (wordByte(v[i]) || v[i] == '.' || v[i] == '-' && i == start) {
		i++
	}
	if i == start && (i >= len(v) || v[i] != '\'' && v[i] != '"' && v[i] != ')') {
		return false
	}
	for i < len(v) && (v[i] == '\'' || v[i] == '"' || v[i] == ')') {
		i++
	}
	i = skipSpace(v, i)
	switch {
	case ascii.HasPrefixFold(v[i:], "or") && i+2 < len(v) && !wordByte(v[i+2]):
		i += 2
	case bytes.HasPrefix(v[i:], []byte("||")):
		i += 2
	default:
		return false
	}
	i = skipSpace(v, i)
	if ascii.HasPrefixFold(v[i:], "not") && i+3 < len(v) && !wordByte(v[i+3]) {
		i = skipSpace(v, i+3)
		if !ascii.HasPrefixFold(v[i:], "false") {
			return false
		}
		i += len("false")
	} else if ascii.HasPrefixFold(v[i:], "true") {
		i += len("true")
	} else {
		return false
	}
	if i < len(v) && wordByte(v[i]) {
		return false
	}
	rest := v[skipSpace(v, i):]
	return len(rest) == 0 || rest[0] == '#' || rest[0] == ';' || rest[0] == ')' ||
		bytes.HasPrefix(rest, []byte("--")) || bytes.HasPrefix(rest, []byte("/*"))
}

func skipSpace(v []byte, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r' || v[i] == '+') {
		i++
	}
	return i
}

// plainComparisons reports a value libinjection read as numbers joined by
// a logical operator (fingerprint "1&1", "1&1&1") that is prose
// arithmetic rather than an injected condition: comparisons joined by
// and only, none of them an identity ("5 > 3 and 2 < 4"). An or, or a
// comparison of a number with itself ("1 and 1=1"), is the tautology an
// injection adds, and stays refused.
func plainComparisons(fingerprint string, v []byte) bool {
	if len(fingerprint) < 3 {
		return false
	}
	for i := 0; i < len(fingerprint); i++ {
		if c := fingerprint[i]; c != '1' && c != '&' {
			return false
		}
	}
	i := 0
	for {
		i = skipSpace(v, i)
		a, j, ok := number(v, i)
		if !ok {
			return false
		}
		i = skipSpace(v, j)
		op, k := comparison(v, i)
		if op == "" {
			return false // a bare number joined by and: "1 and 2" is as likely a probe
		}
		i = skipSpace(v, k)
		b, j, ok := number(v, i)
		if !ok {
			return false
		}
		if a == b && (op == "=" || op == "<=" || op == ">=" || op == "==") {
			return false
		}
		i = skipSpace(v, j)
		if i == len(v) {
			return true
		}
		switch {
		case ascii.HasPrefixFold(v[i:], "and") && i+3 < len(v) && !wordByte(v[i+3]):
			i += 3
		case bytes.HasPrefix(v[i:], []byte("&&")):
			i += 2
		default:
			return false
		}
	}
}

// number reads the digits (and one '.') at v[i:].
func number(v []byte, i int) (string, int, bool) {
	j := i
	for j < len(v) && ('0' <= v[j] && v[j] <= '9' || v[j] == '.') {
		j++
	}
	if j == i || j < len(v) && wordByte(v[j]) {
		return "", i, false
	}
	return string(v[i:j]), j, true
}

// comparison reads a comparison operator at v[i:].
func comparison(v []byte, i int) (string, int) {
	for _, op := range []string{"<=", ">=", "<>", "!=", "==", "<", ">", "="} {
		if bytes.HasPrefix(v[i:], []byte(op)) {
			return op, i + len(op)
		}
	}
	return "", i
}
