package sign

import (
	"errors"
	"unicode/utf8"
)

// Header names of a signed request.
const (
	HeaderAppKey    = "X-App-Key"
	HeaderTimestamp = "X-Timestamp"
	HeaderNonce     = "X-Nonce"
	HeaderSign      = "X-Sign"
)

// FormContentType is the Content-Type whose POST body is signed.
const FormContentType = "application/x-www-form-urlencoded"

// Limits on the work one signature may cost.
const (
	// MaxParams is the most parameters (repeats included, skipped ones not)
	// the query and form may hold together.
	MaxParams = 256
	// MaxInput is the most bytes query, form, timestamp and nonce may hold
	// together.
	MaxInput = 64 << 10
)

// SignatureLen is the length of a signature: 64 lowercase hex digits.
const SignatureLen = 64

var (
	// ErrEncoding reports invalid percent-encoding in a parameter.
	ErrEncoding = errors.New("sign: invalid percent-encoding")
	// ErrUTF8 reports a decoded parameter key or value that is not valid UTF-8.
	ErrUTF8 = errors.New("sign: parameter is not valid UTF-8")
	// ErrTooManyParams reports more than MaxParams parameters.
	ErrTooManyParams = errors.New("sign: too many parameters")
	// ErrTooLarge reports more than MaxInput bytes of signing input.
	ErrTooLarge = errors.New("sign: signing input too large")
	// ErrSignature reports a signature that is malformed (not 64 lowercase
	// hex digits) or does not match.
	ErrSignature = errors.New("sign: signature mismatch")
	// ErrFormMethod reports a form body given for a method other than POST;
	// only a POST body is signed.
	ErrFormMethod = errors.New("sign: a form body is signed only for POST")
	// ErrRepeated reports a parameter given more than once with different
	// values (in the query, in the form, or in both): only one value could
	// be signed, and the backend might read another.
	ErrRepeated = errors.New("sign: repeated parameter with different values")
	// ErrPath reports a path that scheme v2 cannot sign because it is not in
	// canonical form (see [IsCanonicalPath]).
	ErrPath = errors.New("sign: path not in canonical form")
	// ErrField reports a method, timestamp or nonce that scheme v2 cannot
	// sign: the method must be an HTTP token, the timestamp and nonce
	// non-empty visible ASCII.
	ErrField = errors.New("sign: invalid method, timestamp or nonce")
)

// MaxRepeatedKey is the most bytes of a repeated key that
// [Verifier.RepeatedKey] keeps, for an error message.
const MaxRepeatedKey = 64

// IsForm reports whether a request with this method and Content-Type has its
// body signed: the method is exactly "POST" (methods are case-sensitive) and
// the media type, ignoring parameters such as charset and case, is
// application/x-www-form-urlencoded. The body is then decoded as UTF-8
// whatever charset it names. IsForm does not allocate.
func IsForm[T ~string | ~[]byte](method, contentType T) bool {
	if len(method) != 4 || method[0] != 'P' || method[1] != 'O' || method[2] != 'S' || method[3] != 'T' {
		return false
	}
	ct := contentType
	for i := 0; i < len(ct); i++ {
		if ct[i] == ';' {
			ct = ct[:i]
			break
		}
	}
	ct = trimOWS(ct)
	if len(ct) != len(FormContentType) {
		return false
	}
	for i := 0; i < len(ct); i++ {
		c := ct[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != FormContentType[i] {
			return false
		}
	}
	return true
}

func trimOWS[T ~string | ~[]byte](s T) T {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// compareKeys orders two valid UTF-8 keys by their UTF-16 code units, as
// Java's String.compareTo does. UTF-8 byte order is code point order, which
// agrees with UTF-16 order except that U+E000–U+FFFF (one code unit each)
// sort after the supplementary characters (surrogate pairs, D800–DFFF), so
// only the first differing character needs a second look.
func compareKeys(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	if a[i] < utf8.RuneSelf && b[i] < utf8.RuneSelf {
		return int(a[i]) - int(b[i])
	}
	// a[:i] == b[:i] and both are valid UTF-8, so the character that differs
	// starts at the same place in both.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRune(a[i:])
	rb, _ := utf8.DecodeRune(b[i:])
	return int(utf16Weight(ra)) - int(utf16Weight(rb))
}

// utf16Weight maps a code point to a number whose order is the order of its
// first UTF-16 code unit, refined by code point: U+E000–U+FFFF move above
// every supplementary character.
func utf16Weight(r rune) rune {
	if r >= 0xE000 && r <= 0xFFFF {
		return r + 0x200000
	}
	return r
}

// unhex returns the value of a hex digit and whether c is one.
func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// validSignature reports whether sig is 64 lowercase hex digits. It looks
// only at the caller's input, never at the expected value, so its timing
// reveals nothing secret.
func validSignature(sig []byte) bool {
	if len(sig) != SignatureLen {
		return false
	}
	for _, c := range sig {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// IsCanonicalPath reports whether scheme v2 can sign path as it is: it
// starts with '/'; it has no empty segment ("//"; a trailing '/' is fine)
// and no "." or ".." segment; its other bytes are RFC 3986 path characters
// (unreserved A–Z a–z 0–9 - . _ ~, sub-delims ! $ & ' ( ) * + , ; =, and
// ':' and '@'); and every '%' starts an escape of two uppercase hex digits
// for a byte that is not unreserved (unreserved characters are sent as
// themselves, RFC 3986 §2.3). Such a path
// is its own canonical form: the gateway routes and forwards exactly these
// bytes. IsCanonicalPath does not allocate.
func IsCanonicalPath[T ~string | ~[]byte](path T) bool {
	if len(path) == 0 || path[0] != '/' {
		return false
	}
	seg := 1 // start of the current segment
	for i := 1; i <= len(path); i++ {
		if i == len(path) || path[i] == '/' {
			switch s := path[seg:i]; {
			case len(s) == 0 && i < len(path): // "//"; a trailing '/' is fine
				return false
			case len(s) == 1 && s[0] == '.', len(s) == 2 && s[0] == '.' && s[1] == '.':
				return false
			}
			seg = i + 1
			continue
		}
		switch c := path[i]; {
		case pathChar(c):
		case c == '%':
			if i+2 >= len(path) {
				return false
			}
			hi, ok1 := upperHex(path[i+1])
			lo, ok2 := upperHex(path[i+2])
			if !ok1 || !ok2 || unreserved(hi<<4|lo) {
				return false
			}
			i += 2
		default:
			return false
		}
	}
	return true
}

// pathChar reports whether c may appear unescaped in a path segment (RFC
// 3986 §3.3 pchar: unreserved, sub-delims, ':' and '@').
func pathChar(c byte) bool {
	if unreserved(c) {
		return true
	}
	switch c {
	case '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=', ':', '@':
		return true
	}
	return false
}

// upperHex is unhex for the uppercase digits of a canonical escape.
func upperHex(c byte) (byte, bool) {
	if 'a' <= c && c <= 'f' {
		return 0, false
	}
	return unhex(c)
}

// unreserved reports whether c is an RFC 3986 unreserved character.
func unreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

const upperHexDigits = "0123456789ABCDEF"

// appendEscaped appends s percent-encoded as scheme v2 writes parameters:
// every byte but the unreserved ones as %XX with uppercase hex digits.
func appendEscaped[T ~string | ~[]byte](dst []byte, s T) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if unreserved(c) {
			dst = append(dst, c)
			continue
		}
		dst = append(dst, '%', upperHexDigits[c>>4], upperHexDigits[c&15])
	}
	return dst
}

// validMethod reports whether m is an HTTP token (RFC 9110 §5.6.2).
func validMethod[T ~string | ~[]byte](m T) bool {
	if len(m) == 0 {
		return false
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			continue
		}
		switch c {
		case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
			continue
		}
		return false
	}
	return true
}

// visibleField reports whether s is non-empty visible ASCII (no spaces or
// control characters), as scheme v2 requires of the timestamp and nonce so
// that its line breaks stay unambiguous.
func visibleField[T ~string | ~[]byte](s T) bool {
	if len(s) == 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}
