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
	order  []uint16 // v.params positions in signing order, one per key
	dec    []byte   // decoded keys and values that differ from their raw form
	buf    []byte   // HMAC inner block: key^ipad followed by the signing string

	rep    [MaxRepeatedKey]byte // the key of the last ErrRepeated
	repLen int
	repCut bool
}

// param is one parameter; key and val point into the caller's input or into
// Verifier.dec.
type param struct {
	key, val []byte
}

// Parts is a request as scheme v2 signs it, as the gateway received it. Its
// slices are only read during a call.
type Parts struct {
	Method []byte // as sent; case-sensitive
	// Path is the request's path without the query in canonical form
	// (IsCanonicalPath; ErrPath otherwise): the gateway passes the path it
	// routes and forwards, a client's canonical path as sent.
	Path  []byte
	Query []byte // the raw query string, without '?'
	// ContentType decides, with Method, whether Body is a form whose
	// parameters are signed too (IsForm).
	ContentType []byte
	Body        []byte // the raw body; its SHA-256 is signed whatever its type
	Timestamp   []byte // X-Timestamp
	Nonce       []byte // X-Nonce
}

// NewVerifier returns a Verifier whose buffers are already sized for a
// typical request, so the first uses do not allocate either.
func NewVerifier() *Verifier {
	return &Verifier{
		params: make([]param, 0, 32),
		order:  make([]uint16, 0, 32),
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
	if err := v.collect(query, form); err != nil {
		return dst, err
	}
	for _, k := range v.order {
		p := &v.params[k]
		dst = append(dst, p.key...)
		dst = append(dst, p.val...)
	}
	clear(v.params) // drop references to the caller's bytes
	dst = append(dst, "timestamp"...)
	dst = append(dst, ts...)
	dst = append(dst, "nonce"...)
	dst = append(dst, nonce...)
	return dst, nil
}

// v2Tag is the first line of a scheme v2 signing string.
const v2Tag = "tollgate-sign-v2"

// AppendV2 appends the scheme v2 signing string of r to dst and returns the
// extended buffer (see the package documentation). On error dst is returned
// unchanged in length.
func (v *Verifier) AppendV2(dst []byte, r *Parts) ([]byte, error) {
	var form []byte
	if IsForm(r.Method, r.ContentType) {
		form = r.Body
	}
	if len(r.Method)+len(r.Path)+len(r.Query)+len(form)+len(r.Timestamp)+len(r.Nonce) > MaxInput {
		return dst, ErrTooLarge
	}
	if !validMethod(r.Method) || !visibleField(r.Timestamp) || !visibleField(r.Nonce) {
		return dst, ErrField
	}
	if !IsCanonicalPath(r.Path) {
		return dst, ErrPath
	}
	if err := v.collect(r.Query, form); err != nil {
		return dst, err
	}
	dst = append(dst, v2Tag+"\n"...)
	dst = append(dst, r.Method...)
	dst = append(dst, '\n')
	dst = append(dst, r.Path...)
	dst = append(dst, '\n')
	for i, k := range v.order {
		p := &v.params[k]
		if i > 0 {
			dst = append(dst, '&')
		}
		dst = appendEscaped(dst, p.key)
		dst = append(dst, '=')
		dst = appendEscaped(dst, p.val)
	}
	clear(v.params)
	dst = append(dst, '\n')
	dst = append(dst, r.Timestamp...)
	dst = append(dst, '\n')
	dst = append(dst, r.Nonce...)
	dst = append(dst, '\n')
	digest := sha256.Sum256(r.Body)
	return hex.AppendEncode(dst, digest[:]), nil
}

// collect parses query and form into v.params and leaves in v.order the
// parameters to sign, in signing order, one per key (its first value). A
// key repeated with a different value is ErrRepeated (see RepeatedKey). On
// error v.params is cleared; on success the caller clears it after use.
func (v *Verifier) collect(query, form []byte) error {
	// Decoding never makes a component longer, so with this capacity dec is
	// never reallocated while params point into it.
	if need := len(query) + len(form); cap(v.dec) < need {
		v.dec = make([]byte, 0, max(need, 2*cap(v.dec)))
	}
	v.dec = v.dec[:0]
	v.params = v.params[:0]
	v.repLen, v.repCut = 0, false
	err := v.parse(query)
	if err == nil {
		err = v.parse(form)
	}
	if err != nil {
		clear(v.params)
		return err
	}
	v.sortParams()
	// Equal keys are adjacent, in input order (query first): keep the
	// first, and let later ones through only with the same value.
	o := v.order
	n := 0
	for _, k := range o {
		p := &v.params[k]
		if n > 0 {
			if first := &v.params[o[n-1]]; bytes.Equal(p.key, first.key) {
				if !bytes.Equal(p.val, first.val) {
					v.noteRepeated(p.key)
					clear(v.params)
					return ErrRepeated
				}
				continue
			}
		}
		o[n] = k
		n++
	}
	v.order = o[:n]
	return nil
}

// noteRepeated keeps a copy of key, cut at a character boundary, for
// RepeatedKey.
func (v *Verifier) noteRepeated(key []byte) {
	n := copy(v.rep[:], key)
	v.repCut = n < len(key)
	if v.repCut {
		for n > 0 && !utf8.RuneStart(key[n]) {
			n--
		}
	}
	v.repLen = n
}

// RepeatedKey returns, after a call that failed with ErrRepeated, the
// decoded key that was repeated with different values (the first such key
// in signing order), cut to at most MaxRepeatedKey bytes at a character
// boundary, and whether it was cut; after any other outcome it returns nil.
// The key is valid UTF-8; it points into v and is valid until v's next use.
func (v *Verifier) RepeatedKey() (key []byte, cut bool) {
	if v.repLen == 0 && !v.repCut {
		return nil, false
	}
	return v.rep[:v.repLen], v.repCut
}

// sortParams sorts v.order, the positions of v.params, by key and then by
// position. Typical requests have a handful of parameters, for which an
// insertion sort of small indexes beats moving the parameters around.
func (v *Verifier) sortParams() {
	ps := v.params
	v.order = v.order[:0]
	for i := range ps {
		v.order = append(v.order, uint16(i))
	}
	o := v.order
	if len(o) > 16 {
		slices.SortFunc(o, func(a, b uint16) int {
			if c := compareKeys(ps[a].key, ps[b].key); c != 0 {
				return c
			}
			return int(a) - int(b)
		})
		return
	}
	for i := 1; i < len(o); i++ {
		x := o[i]
		j := i
		for ; j > 0 && compareKeys(ps[x].key, ps[o[j-1]].key) < 0; j-- {
			o[j] = o[j-1]
		}
		o[j] = x
	}
}

// parse splits s into parameters and appends them to v.params. One pass
// finds the separators and notes, for key and value, whether they hold
// anything that needs decoding or checking ('%', '+', non-ASCII bytes).
func (v *Verifier) parse(s []byte) error {
	for i := 0; i < len(s); i++ {
		start, eq := i, -1
		var plain [2]bool // key, value: nothing to decode or check
		plain[0], plain[1] = true, true
		for ; i < len(s) && s[i] != '&'; i++ {
			switch c := s[i]; {
			case c == '=' && eq < 0:
				eq = i
			case c == '%' || c == '+' || c >= utf8.RuneSelf:
				plain[min(eq+1, 1)] = false
			}
		}
		key, val := s[start:i], s[i:i]
		if eq >= 0 {
			key, val = s[start:eq], s[eq+1:i]
		}
		if len(key) == 0 {
			continue // empty segment or empty key
		}
		if len(v.params) == MaxParams {
			return ErrTooManyParams
		}
		var err error
		if !plain[0] {
			if key, err = v.unescape(key); err != nil {
				return err
			}
		}
		if !plain[1] {
			if val, err = v.unescape(val); err != nil {
				return err
			}
		}
		v.params = append(v.params, param{key: key, val: val})
	}
	return nil
}

// unescape percent-decodes s, '+' meaning a space, into v.dec, which has
// room for it (see Append), and checks the result is valid UTF-8.
func (v *Verifier) unescape(s []byte) ([]byte, error) {
	start := len(v.dec)
	d := v.dec
	for i := 0; i < len(s); i++ {
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
	mac, err := v.sum(secret, nil, query, form, ts, nonce)
	if err != nil {
		return dst, err
	}
	return hex.AppendEncode(dst, mac[:]), nil
}

// AppendSignatureV2 appends the 64-digit lowercase hex scheme v2 signature
// of r to dst, as SignV2 does.
func (v *Verifier) AppendSignatureV2(dst, secret []byte, r *Parts) ([]byte, error) {
	mac, err := v.sum(secret, r, nil, nil, nil, nil)
	if err != nil {
		return dst, err
	}
	return hex.AppendEncode(dst, mac[:]), nil
}

// Verify checks that sig is the signature of the request under secret. It
// returns nil on a match; ErrSignature when sig is not 64 lowercase hex
// digits or does not match; otherwise the error that made the parameters
// unusable (ErrEncoding, ErrUTF8, ErrTooManyParams, ErrTooLarge,
// ErrRepeated). The comparison takes constant time.
func (v *Verifier) Verify(secret, query, form, ts, nonce, sig []byte) error {
	v.repLen, v.repCut = 0, false
	if !validSignature(sig) {
		return ErrSignature
	}
	mac, err := v.sum(secret, nil, query, form, ts, nonce)
	if err != nil {
		return err
	}
	return compareMAC(&mac, sig)
}

// VerifyV2 checks that sig is the scheme v2 signature of r under secret,
// with the results of Verify, and ErrField or ErrPath for a method,
// timestamp, nonce or path that scheme v2 cannot sign.
func (v *Verifier) VerifyV2(secret []byte, r *Parts, sig []byte) error {
	v.repLen, v.repCut = 0, false
	if !validSignature(sig) {
		return ErrSignature
	}
	mac, err := v.sum(secret, r, nil, nil, nil, nil)
	if err != nil {
		return err
	}
	return compareMAC(&mac, sig)
}

// compareMAC compares sig with the hex of mac in constant time.
func compareMAC(mac *[sha256.Size]byte, sig []byte) error {
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

// sum returns HMAC-SHA256(secret, signing string) of scheme v2 for r when r
// is not nil, else of scheme v1 for the other arguments. It is computed as
// RFC 2104 defines it: H((K^opad) || H((K^ipad) || m)), with K the secret
// padded to the 64-byte block (or its SHA-256 when longer). Building the
// inner block in v.buf lets sha256.Sum256 run without a hash object to
// allocate.
func (v *Verifier) sum(secret []byte, r *Parts, query, form, ts, nonce []byte) ([sha256.Size]byte, error) {
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
	var err error
	if r != nil {
		buf, err = v.AppendV2(buf, r)
	} else {
		buf, err = v.Append(buf, query, form, ts, nonce)
	}
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
