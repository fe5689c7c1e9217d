package dubbo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

var errBadUTF8 = errors.New("dubbo: hessian string is not valid UTF-8")

// stringChunks reads a string whose tag was read, calling emit with each
// character.
func (r *decoder) stringChunks(tag byte, emit func(rune)) error {
	for {
		var units int
		final := true
		switch {
		case tag <= 0x1f:
			units = int(tag)
		case tag >= 0x30 && tag <= 0x33:
			b, err := r.take(1)
			if err != nil {
				return err
			}
			units = int(tag-0x30)<<8 | int(b[0])
		case tag == 'R' || tag == 'S':
			b, err := r.take(2)
			if err != nil {
				return err
			}
			units = int(binary.BigEndian.Uint16(b))
			final = tag == 'S'
		default:
			return fmt.Errorf("dubbo: expected a string, found tag 0x%02x", tag)
		}
		if err := r.chars(units, emit); err != nil {
			return err
		}
		if final {
			return nil
		}
		var err error
		if tag, err = r.byte(); err != nil {
			return err
		}
	}
}

// chars reads units UTF-16 units, each written in UTF-8 (surrogates as
// three bytes each, as Java writes them; a four-byte sequence counts as
// two units).
func (r *decoder) chars(units int, emit func(rune)) error {
	var high rune
	for units > 0 {
		if r.i >= len(r.d) {
			return errTruncated
		}
		c, size := utf8.DecodeRune(r.d[r.i:])
		if c == utf8.RuneError && size <= 1 {
			// Maybe a surrogate in three bytes, which Go's decoder refuses.
			if len(r.d)-r.i < 3 || r.d[r.i] != 0xed {
				return errBadUTF8
			}
			b := r.d[r.i:]
			c, size = rune(b[0]&0x0f)<<12|rune(b[1]&0x3f)<<6|rune(b[2]&0x3f), 3
		}
		r.i += size
		units--
		if c > 0xffff {
			units-- // counted as its two surrogates
		}
		switch {
		case c >= 0xd800 && c < 0xdc00:
			if high != 0 {
				emit(utf8.RuneError)
			}
			high = c
			continue
		case c >= 0xdc00 && c < 0xe000 && high != 0:
			c = utf16.DecodeRune(high, c)
		case c >= 0xd800 && c < 0xe000:
			c = utf8.RuneError
		case high != 0:
			emit(utf8.RuneError)
		}
		high = 0
		emit(c)
	}
	if high != 0 {
		emit(utf8.RuneError)
	}
	if units < 0 {
		return errBadUTF8
	}
	return nil
}

// stringJSON writes a string value as a JSON string.
func (r *decoder) stringJSON(tag byte) error {
	r.out = append(r.out, '"')
	err := r.stringChunks(tag, func(c rune) { r.out = appendJSONRune(r.out, c) })
	if err != nil {
		return err
	}
	r.out = append(r.out, '"')
	return r.grown()
}

// plainString reads a short string the gateway needs as Go text (a class
// or type name, a field name).
func (r *decoder) plainString(tag byte) (string, error) {
	var b []byte
	err := r.stringChunks(tag, func(c rune) {
		if len(b) < 1024 {
			b = utf8.AppendRune(b, c)
		}
	})
	if len(b) >= 1024 {
		return "", errors.New("dubbo: hessian name longer than 1 KiB")
	}
	return string(b), err
}

const hexDigits = "0123456789abcdef"

func appendJSONRune(dst []byte, c rune) []byte {
	switch {
	case c == '"' || c == '\\':
		return append(dst, '\\', byte(c))
	case c < 0x20:
		switch c {
		case '\n':
			return append(dst, '\\', 'n')
		case '\r':
			return append(dst, '\\', 'r')
		case '\t':
			return append(dst, '\\', 't')
		}
		return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
	case c == 0x2028 || c == 0x2029: // valid JSON, but not valid JavaScript
		return append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xf])
	case c < utf8.RuneSelf:
		return append(dst, byte(c))
	}
	return utf8.AppendRune(dst, c)
}
