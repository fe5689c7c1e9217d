// Package ascii compares protocol tokens (header names, schemes, auth
// schemes) under ASCII case folding only: unlike bytes.EqualFold it never
// folds non-ASCII letters (the Kelvin sign is not "k"), and it compares a
// []byte with a string without converting either.
package ascii

// EqualFold reports whether b and s are equal ignoring ASCII letter case.
func EqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		x, y := b[i], s[i]
		if x == y {
			continue
		}
		if x|0x20 != y|0x20 || x|0x20 < 'a' || x|0x20 > 'z' {
			return false
		}
	}
	return true
}

// Lower returns c with an ASCII upper-case letter made lower-case.
func Lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// AppendLower appends b with its ASCII upper-case letters made lower-case.
func AppendLower(dst, b []byte) []byte {
	for _, c := range b {
		dst = append(dst, Lower(c))
	}
	return dst
}

// HasPrefixFold reports whether b starts with prefix ignoring ASCII case.
func HasPrefixFold(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && EqualFold(b[:len(prefix)], prefix)
}

// Unhex returns the value of the hexadecimal digit c, or -1.
func Unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}

// TrimOWS removes the optional whitespace (spaces and tabs) HTTP allows
// around field values and list elements.
func TrimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}
