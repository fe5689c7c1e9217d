// Package signer puts the signature headers on load generators' requests:
// each request a fresh nonce, signed with the allocation-free
// sign.Verifier so the generator stays cheap.
package signer

import (
	"strconv"

	"github.com/tollgate/tollgate/sign"
	"github.com/valyala/fasthttp"
)

var (
	hdrTimestamp = []byte(sign.HeaderTimestamp)
	hdrNonce     = []byte(sign.HeaderNonce)
	hdrSign      = []byte(sign.HeaderSign)
)

// Signer builds the headers of one request at a time; one per worker.
type Signer struct {
	v              *sign.Verifier
	secret, query  []byte
	prefix         []byte // run prefix and '-'
	ts, nonce, sig []byte
}

// New returns a Signer for requests whose raw query is query; nonces are
// prefix followed by the request's index in hex, so a prefix unique to the
// run and worker makes every nonce new.
func New(secret, query string, prefix []byte) *Signer {
	return &Signer{
		v: sign.NewVerifier(), secret: []byte(secret), query: []byte(query), prefix: prefix,
		ts: make([]byte, 0, 16), nonce: make([]byte, 0, 64), sig: make([]byte, 0, sign.SignatureLen),
	}
}

// Set signs request index i at unix second ts (with sig already known
// when non-nil) and puts X-Timestamp, X-Nonce and X-Sign on req (the
// caller sets X-App-Key once).
func (s *Signer) Set(req *fasthttp.Request, i uint64, ts int64, sig []byte) error {
	s.ts = strconv.AppendInt(s.ts[:0], ts, 10)
	s.nonce = strconv.AppendUint(append(s.nonce[:0], s.prefix...), i, 16)
	if sig == nil {
		var err error
		if s.sig, err = s.v.AppendSignature(s.sig[:0], s.secret, s.query, nil, s.ts, s.nonce); err != nil {
			return err
		}
		sig = s.sig
	}
	req.Header.SetCanonical(hdrTimestamp, s.ts)
	req.Header.SetCanonical(hdrNonce, s.nonce)
	req.Header.SetCanonical(hdrSign, sig)
	return nil
}

// Signature returns the signature of the last Set that computed one.
func (s *Signer) Signature() []byte { return s.sig }

// Nonce returns the nonce of the last Set.
func (s *Signer) Nonce() []byte { return s.nonce }
