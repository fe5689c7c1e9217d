package jwt

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
)

// LoadPEMKey reads a public key for RS256 or ES256 from a PEM file: a
// "PUBLIC KEY" (PKIX), an "RSA PUBLIC KEY" (PKCS #1) or a "CERTIFICATE"
// (whose key is taken as is; the certificate's dates and chain are not
// checked). The first such block is used and other blocks are skipped; a
// file holding a private key is refused, so private keys are never asked
// for. It returns an *rsa.PublicKey or an *ecdsa.PublicKey on P-256.
func LoadPEMKey(path string) (crypto.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: reading public key: %w", err)
	}
	pub, err := parsePEMKey(data)
	if err != nil {
		return nil, fmt.Errorf("auth: public key %s: %w", path, err)
	}
	return pub, nil
}

func parsePEMKey(data []byte) (crypto.PublicKey, error) {
	for blocks := 0; ; blocks++ {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			if blocks == 0 {
				return nil, errors.New("no PEM block found")
			}
			return nil, errors.New("no PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE block found")
		}
		var pub any
		var err error
		switch b.Type {
		case "PUBLIC KEY":
			pub, err = x509.ParsePKIXPublicKey(b.Bytes)
		case "RSA PUBLIC KEY":
			pub, err = x509.ParsePKCS1PublicKey(b.Bytes)
		case "CERTIFICATE":
			var cert *x509.Certificate
			if cert, err = x509.ParseCertificate(b.Bytes); err == nil {
				pub = cert.PublicKey
			}
		case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY":
			return nil, fmt.Errorf("holds a %s; the gateway needs only the public key", b.Type)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s block: %w", b.Type, err)
		}
		return checkPublicKey(pub)
	}
}

// checkPublicKey accepts the key types Key.Public takes.
func checkPublicKey(pub any) (crypto.PublicKey, error) {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return k, nil
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("ECDSA key on %s; ES256 needs P-256", k.Curve.Params().Name)
		}
		return k, nil
	default:
		return nil, fmt.Errorf("unsupported key type %T (want RSA or ECDSA P-256)", pub)
	}
}

// jwk is one JSON Web Key (RFC 7517, RFC 7518 §6) as far as the gateway
// reads it.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
	// RSA
	N string `json:"n"`
	E string `json:"e"`
	// EC
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
	// oct
	K string `json:"k"`
}

// LoadJWKS reads a JWK Set file ({"keys":[...]}, RFC 7517 §5) and returns
// its signature keys: "RSA" keys for RS256, "EC" keys on P-256 for ES256,
// and "oct" keys for HS256. Keys marked "use":"enc" are skipped. An alg
// other than the one the key type gives, another curve, or another kty is
// an error naming the key, rather than a key silently missing later. A set
// with no usable key is an error too.
func LoadJWKS(path string) ([]Key, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: reading jwks: %w", err)
	}
	keys, err := parseJWKS(data)
	if err != nil {
		return nil, fmt.Errorf("auth: jwks %s: %w", path, err)
	}
	return keys, nil
}

func parseJWKS(data []byte) ([]Key, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("not a JWK set: %w", err)
	}
	var out []Key
	for i, k := range set.Keys {
		if k.Use == "enc" {
			continue
		}
		key, err := k.jwtKey()
		if err != nil {
			if k.Kid != "" {
				return nil, fmt.Errorf("key %d (kid %q): %w", i, k.Kid, err)
			}
			return nil, fmt.Errorf("key %d: %w", i, err)
		}
		out = append(out, key)
	}
	if len(out) == 0 {
		return nil, errors.New("no signature keys")
	}
	return out, nil
}

func (k *jwk) jwtKey() (Key, error) {
	out := Key{KID: k.Kid}
	want := ""
	switch k.Kty {
	case "RSA":
		want = AlgRS256
		n, err := jwkBytes("n", k.N)
		if err != nil {
			return out, err
		}
		e, err := jwkBytes("e", k.E)
		if err != nil {
			return out, err
		}
		e = bytes.TrimLeft(e, "\x00")
		if len(e) == 0 || len(e) > 4 {
			return out, errors.New(`"e" is out of range`)
		}
		exp := 0
		for _, b := range e {
			exp = exp<<8 | int(b)
		}
		if exp > 1<<31-1 {
			return out, errors.New(`"e" is out of range`)
		}
		out.Public = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: exp}
	case "EC":
		want = AlgES256
		if k.Crv != "P-256" {
			return out, fmt.Errorf("curve %q not supported; ES256 needs P-256", k.Crv)
		}
		x, err := jwkBytes("x", k.X)
		if err != nil {
			return out, err
		}
		y, err := jwkBytes("y", k.Y)
		if err != nil {
			return out, err
		}
		if len(x) != 32 || len(y) != 32 {
			return out, errors.New(`P-256 "x" and "y" must be 32 bytes each`)
		}
		point := make([]byte, 0, 65)
		point = append(point, 4)
		point = append(point, x...)
		point = append(point, y...)
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), point)
		if err != nil {
			return out, fmt.Errorf("invalid P-256 point: %w", err)
		}
		out.Public = pub
	case "oct":
		want = AlgHS256
		secret, err := jwkBytes("k", k.K)
		if err != nil {
			return out, err
		}
		out.Secret = secret
	case "":
		return out, errors.New(`missing "kty"`)
	default:
		return out, fmt.Errorf("unsupported kty %q (want RSA, EC or oct)", k.Kty)
	}
	if k.Alg != "" && k.Alg != want {
		return out, fmt.Errorf("alg %q not supported for kty %s (want %s)", k.Alg, k.Kty, want)
	}
	out.Alg = want
	return out, nil
}

// jwkBytes decodes a base64url member; padding is tolerated.
func jwkBytes(name, s string) ([]byte, error) {
	if s == "" {
		return nil, fmt.Errorf("missing %q", name)
	}
	b, err := base64.RawURLEncoding.DecodeString(jwkTrimPad(s))
	if err != nil {
		return nil, fmt.Errorf("%q is not base64url: %w", name, err)
	}
	return b, nil
}

func jwkTrimPad(s string) string {
	for len(s) > 0 && s[len(s)-1] == '=' {
		s = s[:len(s)-1]
	}
	return s
}

// Key is one key a JWT may be signed with. The key decides the
// algorithm: a token is verified only with the algorithm of the key that
// verifies it, whatever its header claims.
type Key struct {
	// KID is the key id tokens name in their "kid" header; "" for a key
	// without one, which tokens naming an unknown kid may still use (see
	// NewJWT).
	KID string
	// Alg is AlgHS256, AlgRS256 or AlgES256; "" infers it from the key
	// material (Secret → HS256, *rsa.PublicKey → RS256, *ecdsa.PublicKey on
	// P-256 → ES256).
	Alg string
	// Secret is the HS256 shared secret, at least 32 bytes (RFC 7518 §3.2).
	Secret []byte
	// Public is the RS256 key (*rsa.PublicKey, at least 2048 bits) or the
	// ES256 key (*ecdsa.PublicKey on P-256).
	Public crypto.PublicKey
}

type jwtKey struct {
	kid    string
	alg    string
	secret []byte
	rsa    *rsa.PublicKey
	ec     *ecdsa.PublicKey
}

func compileJWTKey(k Key) (jwtKey, error) {
	alg := k.Alg
	if alg == "" {
		switch pub := k.Public.(type) {
		case nil:
			alg = AlgHS256
		case *rsa.PublicKey:
			alg = AlgRS256
		case *ecdsa.PublicKey:
			alg = AlgES256
		default:
			return jwtKey{}, fmt.Errorf("unsupported public key type %T", pub)
		}
	}
	ck := jwtKey{kid: k.KID, alg: alg}
	switch alg {
	case AlgHS256:
		if k.Public != nil {
			return jwtKey{}, errors.New("an HS256 key takes a secret, not a public key")
		}
		if len(k.Secret) < 32 {
			return jwtKey{}, fmt.Errorf("HS256 secret has %d bytes, needs at least 32", len(k.Secret))
		}
		ck.secret = bytes.Clone(k.Secret)
	case AlgRS256:
		pub, ok := k.Public.(*rsa.PublicKey)
		if !ok || pub == nil || pub.N == nil {
			return jwtKey{}, fmt.Errorf("an RS256 key needs an *rsa.PublicKey, got %T", k.Public)
		}
		if len(k.Secret) > 0 {
			return jwtKey{}, errors.New("an RS256 key takes a public key, not a secret")
		}
		if pub.N.BitLen() < 2048 {
			return jwtKey{}, fmt.Errorf("RSA key has %d bits, needs at least 2048", pub.N.BitLen())
		}
		if pub.E < 3 || pub.E&1 == 0 {
			return jwtKey{}, fmt.Errorf("RSA public exponent %d is invalid", pub.E)
		}
		ck.rsa = pub
	case AlgES256:
		pub, ok := k.Public.(*ecdsa.PublicKey)
		if !ok || pub == nil {
			return jwtKey{}, fmt.Errorf("an ES256 key needs an *ecdsa.PublicKey, got %T", k.Public)
		}
		if len(k.Secret) > 0 {
			return jwtKey{}, errors.New("an ES256 key takes a public key, not a secret")
		}
		if pub.Curve != elliptic.P256() {
			return jwtKey{}, errors.New("an ES256 key must be on curve P-256")
		}
		if _, err := pub.Bytes(); err != nil {
			return jwtKey{}, fmt.Errorf("invalid P-256 key: %w", err)
		}
		ck.ec = pub
	default:
		return jwtKey{}, fmt.Errorf("unsupported algorithm %q (want %s, %s or %s)", alg, AlgHS256, AlgRS256, AlgES256)
	}
	return ck, nil
}

func (k *jwtKey) verify(signed, sig []byte, digest *[sha256.Size]byte) bool {
	switch k.alg {
	case AlgHS256:
		m := hmac.New(sha256.New, k.secret)
		m.Write(signed)
		var sum [sha256.Size]byte
		return hmac.Equal(m.Sum(sum[:0]), sig)
	case AlgRS256:
		return rsa.VerifyPKCS1v15(k.rsa, crypto.SHA256, digest[:], sig) == nil
	case AlgES256:
		// JWS carries the raw r||s pair, 32 bytes each (RFC 7518 §3.4),
		// not ASN.1.
		if len(sig) != 64 {
			return false
		}
		r := new(big.Int).SetBytes(sig[:32])
		s := new(big.Int).SetBytes(sig[32:])
		return ecdsa.Verify(k.ec, digest[:], r, s)
	}
	return false
}
