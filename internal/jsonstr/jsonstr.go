// Package jsonstr writes strings as JSON strings: the one escaper the
// recorder, the transcoder and the Dubbo converter share.
package jsonstr

import (
	"encoding/binary"
	"unicode/utf8"

	"github.com/tollgate/tollgate/internal/bytesconv"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string. Bytes that are not UTF-8 (a
// header value with obs-text) become U+FFFD: JSON has no way to carry them.
func AppendString(dst []byte, s string) []byte { return Append(dst, bytesconv.S2B(s)) }

// Append is AppendString for bytes.
func Append(dst, b []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(b); {
		// Runs of plain ASCII, the bulk of bodies, go eight bytes at a time.
		for i+8 <= len(b) && plainWord(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(b[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			dst = append(dst, b[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		dst = append(dst, b[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, b[start:]...)
	return append(dst, '"')
}

// plainWord reports whether the eight bytes of x are all printable ASCII
// other than '"' and '\\': bytes a JSON string carries as they are.
func plainWord(x uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	below := (x - lo*0x20) & ^x & hi
	quote := x ^ (lo * '"')
	slash := x ^ (lo * '\\')
	return (x&hi | below | (quote-lo)&^quote&hi | (slash-lo)&^slash&hi) == 0
}
