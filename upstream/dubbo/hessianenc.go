package dubbo

import (
	"encoding/binary"
	"math"
	"unicode/utf8"
)

// Hessian 2 encoding, written straight into a frame buffer: the values a
// generic invocation carries are strings, numbers, booleans, null, maps
// and lists, and writing them from their JSON needs no value tree.

func appendNull(dst []byte) []byte { return append(dst, 'N') }

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 'T')
	}
	return append(dst, 'F')
}

// appendInt writes a 32-bit int in its shortest form.
func appendInt(dst []byte, v int32) []byte {
	switch {
	case v >= -16 && v <= 47:
		return append(dst, byte(0x90+v))
	case v >= -2048 && v <= 2047:
		return append(dst, byte(0xc8+(v>>8)), byte(v))
	case v >= -262144 && v <= 262143:
		return append(dst, byte(0xd4+(v>>16)), byte(v>>8), byte(v))
	}
	dst = append(dst, 'I')
	return binary.BigEndian.AppendUint32(dst, uint32(v))
}

// appendLong writes a 64-bit long in its shortest form.
func appendLong(dst []byte, v int64) []byte {
	switch {
	case v >= -8 && v <= 15:
		return append(dst, byte(0xe0+v))
	case v >= -2048 && v <= 2047:
		return append(dst, byte(0xf8+(v>>8)), byte(v))
	case v >= -262144 && v <= 262143:
		return append(dst, byte(0x3c+(v>>16)), byte(v>>8), byte(v))
	case v >= math.MinInt32 && v <= math.MaxInt32:
		dst = append(dst, 0x59)
		return binary.BigEndian.AppendUint32(dst, uint32(v))
	}
	dst = append(dst, 'L')
	return binary.BigEndian.AppendUint64(dst, uint64(v))
}

// appendDouble writes a double, in a short form when it is a small whole
// number.
func appendDouble(dst []byte, v float64) []byte {
	switch {
	case v == 0 && !math.Signbit(v):
		return append(dst, 0x5b)
	case v == 1:
		return append(dst, 0x5c)
	case v == math.Trunc(v) && v >= -128 && v <= 127:
		return append(dst, 0x5d, byte(int8(v)))
	case v == math.Trunc(v) && v >= -32768 && v <= 32767:
		return append(dst, 0x5e, byte(int16(v)>>8), byte(int16(v)))
	}
	dst = append(dst, 'D')
	return binary.BigEndian.AppendUint64(dst, math.Float64bits(v))
}

// maxChunk is the most UTF-16 units in one string chunk, as Java's
// Hessian2Output writes them.
const maxChunk = 0x8000

// appendString writes s as Hessian counts strings: in UTF-16 units, each
// encoded in UTF-8, a character beyond the BMP as its two surrogates of
// three bytes each (what Java's reader expects); invalid UTF-8 becomes
// U+FFFD.
func appendString(dst []byte, s []byte) []byte {
	for {
		units, cut := utf16Prefix(s, maxChunk)
		final := cut == len(s)
		switch {
		case final && units < 32:
			dst = append(dst, byte(units))
		case final && units < 1024:
			dst = append(dst, byte(0x30+(units>>8)), byte(units))
		case final:
			dst = append(dst, 'S', byte(units>>8), byte(units))
		default:
			dst = append(dst, 'R', byte(units>>8), byte(units))
		}
		dst = appendCESU(dst, s[:cut])
		if final {
			return dst
		}
		s = s[cut:]
	}
}

// utf16Prefix returns how many UTF-16 units the longest prefix of s of at
// most max units holds, and its length in bytes.
func utf16Prefix(s []byte, max int) (units, n int) {
	for n < len(s) {
		r, size := utf8.DecodeRune(s[n:])
		w := 1
		if r > 0xffff {
			w = 2
		}
		if units+w > max {
			break
		}
		units += w
		n += size
	}
	return units, n
}

func appendCESU(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		i += size
		if r <= 0xffff {
			dst = utf8.AppendRune(dst, r) // U+FFFD for invalid input
			continue
		}
		r -= 0x10000
		dst = appendSurrogate(dst, 0xd800+(r>>10))
		dst = appendSurrogate(dst, 0xdc00+(r&0x3ff))
	}
	return dst
}

func appendSurrogate(dst []byte, u rune) []byte {
	return append(dst, byte(0xe0|u>>12), byte(0x80|(u>>6)&0x3f), byte(0x80|u&0x3f))
}

func appendStr(dst []byte, s string) []byte {
	// Strings the gateway writes itself (names, versions, attachment
	// values) are short: the common case needs no conversion.
	if len(s) < 32 && ascii(s) {
		dst = append(dst, byte(len(s)))
		return append(dst, s...)
	}
	return appendString(dst, []byte(s))
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// appendTypedListStart starts a fixed-length list of n elements of a
// named type ("[string", "[object"), as Java writes arrays.
func appendTypedListStart(dst []byte, typ string, n int) []byte {
	if n <= 7 {
		dst = append(dst, byte(0x70+n))
		return appendStr(dst, typ)
	}
	dst = append(dst, 'V')
	dst = appendStr(dst, typ)
	return appendInt(dst, int32(n))
}

// Untyped maps and variable-length lists end with 'Z'.
const (
	mapStart  = 'H'
	listStart = 0x57
	endMark   = 'Z'
)
