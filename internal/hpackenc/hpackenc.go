// Package hpackenc writes HPACK header blocks (RFC 7541) without the
// dynamic table: the gateway's answers to HTTP/2 clients and its calls to
// gRPC backends.
package hpackenc

import (
	"unsafe"

	"golang.org/x/net/http2/hpack"
)

// Header blocks are encoded without HPACK's dynamic table (as nginx
// encodes its answers): a name the static table holds by its index, every
// value as a literal never entered in a table, Huffman-coded when that is
// shorter. An encoder with the dynamic table keeps the strings it indexes
// (a string made per field) and searches its table per field: 13 % of
// the gateway's CPU under h2load. The client's decoder state never
// changes, so blocks need no order among themselves either.

// staticNames are the names of HPACK's static table (RFC 7541 Appendix
// A), by their first index.
var staticNames = func() map[string]uint8 {
	names := [...]string{
		":authority", ":method", ":method", ":path", ":path", ":scheme", ":scheme",
		":status", ":status", ":status", ":status", ":status", ":status", ":status",
		"accept-charset", "accept-encoding", "accept-language", "accept-ranges", "accept",
		"access-control-allow-origin", "age", "allow", "authorization", "cache-control",
		"content-disposition", "content-encoding", "content-language", "content-length",
		"content-location", "content-range", "content-type", "cookie", "date", "etag",
		"expect", "expires", "from", "host", "if-match", "if-modified-since",
		"if-none-match", "if-range", "if-unmodified-since", "last-modified", "link",
		"location", "max-forwards", "proxy-authenticate", "proxy-authorization", "range",
		"referer", "refresh", "retry-after", "server", "set-cookie",
		"strict-transport-security", "transfer-encoding", "user-agent", "vary", "via",
		"www-authenticate",
	}
	m := make(map[string]uint8, len(names))
	for i, n := range names {
		if _, ok := m[n]; !ok {
			m[n] = uint8(i + 1)
		}
	}
	return m
}()

// AppendIndexed appends the static table's entry i, name and value.
func AppendIndexed(dst []byte, i uint8) []byte { return appendInt(dst, 7, 0x80, uint64(i)) }

// Static table entries a client's request uses.
const (
	MethodPost  = 3
	SchemeHTTP  = 6
	SchemeHTTPS = 7
)

// AppendStatus appends the :status field of code.
func AppendStatus(dst []byte, code int) []byte {
	switch code {
	case 200:
		return append(dst, 0x80|8)
	case 204:
		return append(dst, 0x80|9)
	case 206:
		return append(dst, 0x80|10)
	case 304:
		return append(dst, 0x80|11)
	case 400:
		return append(dst, 0x80|12)
	case 404:
		return append(dst, 0x80|13)
	case 500:
		return append(dst, 0x80|14)
	}
	var digits [3]byte
	v := digits[:0]
	if code >= 100 && code <= 999 {
		v = append(v, byte('0'+code/100), byte('0'+code/10%10), byte('0'+code%10))
	}
	dst = append(dst, 0x08) // literal without indexing, name :status
	return appendString(dst, v)
}

// AppendField appends name (any case; sent lowercased) and value as a
// literal never indexed by the client, Huffman-coded where that is
// shorter. scratch holds the lowercased name between calls; it is
// returned grown.
func AppendField(dst, scratch, name, value []byte) ([]byte, []byte) {
	return appendField(dst, scratch, name, value, appendString)
}

// AppendRawField is AppendField with no Huffman coding: cheaper to write
// and to read where the bytes cost less than the CPU (a backend on the
// same network).
func AppendRawField(dst, scratch, name, value []byte) ([]byte, []byte) {
	return appendField(dst, scratch, name, value, appendRawString)
}

func appendField(dst, scratch, name, value []byte, str func(dst, s []byte) []byte) ([]byte, []byte) {
	lower := scratch[:0]
	for _, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower = append(lower, c)
	}
	if i, ok := staticNames[string(lower)]; ok {
		dst = appendInt(dst, 4, 0x00, uint64(i))
	} else {
		dst = append(dst, 0x00)
		dst = str(dst, lower)
	}
	return str(dst, value), lower
}

// appendString appends s as an HPACK string literal.
func appendString(dst, s []byte) []byte {
	if n := hpack.HuffmanEncodeLength(bytesString(s)); n < uint64(len(s)) {
		dst = appendInt(dst, 7, 0x80, n)
		return hpack.AppendHuffmanString(dst, bytesString(s))
	}
	return appendRawString(dst, s)
}

// appendRawString appends s as an HPACK string literal, not Huffman-coded.
func appendRawString(dst, s []byte) []byte {
	dst = appendInt(dst, 7, 0x00, uint64(len(s)))
	return append(dst, s...)
}

// appendInt appends v as an HPACK integer of an n-bit prefix, the
// prefix's other bits set from first (RFC 7541 §5.1).
func appendInt(dst []byte, n uint, first byte, v uint64) []byte {
	limit := uint64(1)<<n - 1
	if v < limit {
		return append(dst, first|byte(v))
	}
	dst = append(dst, first|byte(limit))
	v -= limit
	for v >= 128 {
		dst = append(dst, byte(v&0x7f|0x80))
		v >>= 7
	}
	return append(dst, byte(v))
}

// bytesString views b as a string for a call that does not keep it.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
