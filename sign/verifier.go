package sign

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"slices"
	"unicode/utf8"
)

// A Verifier builds signing strings and checks signatures without allocating
// once its scratch buffers have grown to the size of the requests it sees
// (they stay bounded by MaxParams and MaxInput).
//
// A Verifier is not safe for concurrent use: give each goroutine its own or
// pool them with sync.Pool. The zero value is ready to use.
type Verifier struct {
	params []param
	dec    []byte // decoded keys and values that differ from their raw form
	buf    []byte // HMAC inner block: key^ipad followed by the signing string
}

// param is one parameter; key and val point into the caller's input or into
// Verifier.dec, and seq is its position among all parameters.
type param struct {
	key, val []byte
	seq      int
}

// NewVerifier returns a Verifier whose buffers are already sized for a
// typical request, so the first uses do not allocate either.
func NewVerifier() *Verifier {
	return &Verifier{
		params: make([]param, 0, 32),
		dec:    make([]byte, 0, 1024),
		buf:    make([]byte, 0, 2048),
	}
}

// Append appends the signing string of the given parameters to dst and
// returns the extended buffer. query is the raw query string (without '?');
// form is the urlencoded body, or nil when the request's body is not signed
// (see IsForm). On error dst is returned unchanged in length.
//
// The arguments are only read during the call.
func (v *Verifier) Append(dst, query, form, ts, nonce []byte) ([]byte, error) {
	if len(query)+len(form)+len(ts)+len(nonce) > MaxInput {
		return dst, ErrTooLarge
	}
	// Decoding never makes a component longer, so with this capacity dec is
	// never reallocated while params point into it.
	if need := len(query) + len(form); cap(v.dec) < need {
		v.dec = make([]byte, 0, max(need, 2*cap(v.dec)))
	}
	v.dec = v.dec[:0]
	v.params = v.params[:0]
	if err := v.parse(query); err != nil {
		return dst, err
	}
	if err := v.parse(form); err != nil {
		return dst, err
	}
	slices.SortFunc(v.params, compareParams)
	for i, p := range v.params {
		if i > 0 && bytes.Equal(p.key, v.params[i-1].key) {
			continue // a later value of a key already written
		}
		dst = append(dst, p.key...)
		dst = append(dst, p.val...)
	}
	dst = append(dst, "timestamp"...)
	dst = append(dst, ts...)
	dst = append(dst, "nonce"...)
	dst = append(dst, nonce...)
	clear(v.params) // drop references to the caller's bytes
	return dst, nil
}

func compareParams(a, b param) int {
	if c := compareKeys(a.key, b.key); c != 0 {
		return c
	}
	return a.seq - b.seq
}

// parse splits s into parameters and appends them to v.params.
func (v *Verifier) parse(s []byte) error {
	for len(s) > 0 {
		seg := s
		if i := bytes.IndexByte(s, '&'); i >= 0 {
			seg, s = s[:i], s[i+1:]
		} else {
			s = nil
		}
		key, val := seg, seg[len(seg):]
		if i := bytes.IndexByte(seg, '='); i >= 0 {
			key, val = seg[:i], seg[i+1:]
		}
		if len(key) == 0 {
			continue // empty segment or empty key
		}
		if len(v.params) == MaxParams {
			return ErrTooManyParams
		}
		key, err := v.unescape(key)
		if err != nil {
			return err
		}
		val, err = v.unescape(val)
		if err != nil {
			return err
		}
		v.params = append(v.params, param{key: key, val: val, seq: len(v.params)})
	}
	return nil
}

// unescape percent-decodes s, '+' meaning a space, and checks the result is
// valid UTF-8. When s has nothing to decode it is returned as is; otherwise
// the result is written to v.dec, which has room for it (see Append).
func (v *Verifier) unescape(s []byte) ([]byte, error) {
	i := 0
	for i < len(s) && s[i] != '%' && s[i] != '+' {
		i++
	}
	if i == len(s) {
		if !utf8.Valid(s) {
			return nil, ErrUTF8
		}
		return s, nil
	}
	start := len(v.dec)
	d := append(v.dec, s[:i]...)
	for ; i < len(s); i++ {
		switch c := s[i]; c {
		case '+':
			d = append(d, ' ')
		case '%':
			if i+2 >= len(s) {
				return nil, ErrEncoding
			}
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if !ok1 || !ok2 {
				return nil, ErrEncoding
			}
			d = append(d, hi<<4|lo)
			i += 2
		default:
			d = append(d, c)
		}
	}
	v.dec = d
	out := d[start:len(d):len(d)]
	if !utf8.Valid(out) {
		return nil, ErrUTF8
	}
	return out, nil
}

// AppendSignature appends the 64-digit lowercase hex signature of the request
// to dst, as Sign does.
func (v *Verifier) AppendSignature(dst, secret, query, form, ts, nonce []byte) ([]byte, error) {
	mac, err := v.sum(secret, query, form, ts, nonce)
	if err != nil {
		return dst, err
	}
	return hex.AppendEncode(dst, mac[:]), nil
}

// Verify checks that sig is the signature of the request under secret. It
// returns nil on a match; ErrSignature when sig is not 64 lowercase hex
// digits or does not match; otherwise the error that made the parameters
// unusable (ErrEncoding, ErrUTF8, ErrTooManyParams, ErrTooLarge). The
// comparison takes constant time.
func (v *Verifier) Verify(secret, query, form, ts, nonce, sig []byte) error {
	if !validSignature(sig) {
		return ErrSignature
	}
	mac, err := v.sum(secret, query, form, ts, nonce)
	if err != nil {
		return err
	}
	var want [SignatureLen]byte
	hex.Encode(want[:], mac[:])
	if subtle.ConstantTimeCompare(want[:], sig) != 1 {
		return ErrSignature
	}
	return nil
}

// Check reports whether Verify returns nil.
func (v *Verifier) Check(secret, query, form, ts, nonce, sig []byte) bool {
	return v.Verify(secret, query, form, ts, nonce, sig) == nil
}

// sum returns HMAC-SHA256(secret, signing string), computed as RFC 2104
// defines it: H((K^opad) || H((K^ipad) || m)), with K the secret padded to
// the 64-byte block (or its SHA-256 when longer). Building the inner block
// in v.buf lets sha256.Sum256 run without a hash object to allocate.
func (v *Verifier) sum(secret, query, form, ts, nonce []byte) ([sha256.Size]byte, error) {
	const (
		blockSize = sha256.BlockSize
		ipad      = 0x36
		opad      = 0x5c
	)
	var key [blockSize]byte
	if len(secret) > blockSize {
		h := sha256.Sum256(secret)
		copy(key[:], h[:])
	} else {
		copy(key[:], secret)
	}
	buf := v.buf[:0]
	for _, k := range key {
		buf = append(buf, k^ipad)
	}
	buf, err := v.Append(buf, query, form, ts, nonce)
	v.buf = buf
	if err != nil {
		clear(buf[:blockSize])
		clear(key[:])
		return [sha256.Size]byte{}, err
	}
	inner := sha256.Sum256(buf)
	clear(buf[:blockSize])
	var outer [blockSize + sha256.Size]byte
	for i, k := range key {
		outer[i] = k ^ opad
	}
	copy(outer[blockSize:], inner[:])
	clear(key[:])
	return sha256.Sum256(outer[:]), nil
}
