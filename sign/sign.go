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
)

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
