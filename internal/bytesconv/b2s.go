// Package bytesconv holds the unsafe string/[]byte conversions the gateway
// uses, kept in one place so that every use is easy to find and review.
package bytesconv

import "unsafe"

// B2S returns b as a string without copying. The string is valid only while
// b is neither modified nor released to a pool; never store it.
func B2S(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// S2B returns s as a byte slice without copying. The slice must never be
// written to.
func S2B(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
