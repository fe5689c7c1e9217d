package jwt

import (
	"bufio"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/pipeline"
)

// jwtT0 is the fixed "now" tests start from.
var jwtT0 = time.Unix(1_800_000_000, 0)

// jwtClock is an injected clock tests move by hand.
type jwtClock struct{ ns atomic.Int64 }

func newJWTClock() *jwtClock {
	c := &jwtClock{}
	c.ns.Store(jwtT0.UnixNano())
	return c
}

func (c *jwtClock) Now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *jwtClock) Set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *jwtClock) Add(d time.Duration) { c.ns.Add(int64(d)) }

// jwtRevList is a revocation list tests change while tokens are
// cached: a set of members, as the cluster's revocation set is. Lookups
// allocate nothing.
type jwtRevList struct {
	mu      sync.RWMutex
	members map[string]bool
	asks    atomic.Int64
}

func newJWTRevList() *jwtRevList {
	return &jwtRevList{members: map[string]bool{}}
}

func (r *jwtRevList) Revoked(jti, sub []byte) bool {
	r.asks.Add(1)
	r.mu.RLock()
	defer r.mu.RUnlock()
	return (len(jti) > 0 && r.members[string(jti)]) || r.members[string(sub)]
}

// set revokes (or reinstates) a token id and/or a subject.
func (r *jwtRevList) set(jti, sub string, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if jti != "" {
		r.members[RevokedJTIPrefix+jti] = on
	}
	if sub != "" {
		r.members[RevokedSubPrefix+sub] = on
	}
}

// Test key material, generated once per run.
type jwtKeySet struct {
	hs     []byte
	rsa    *rsa.PrivateKey
	rsa2   *rsa.PrivateKey
	ec     *ecdsa.PrivateKey
	ec2    *ecdsa.PrivateKey
	rsaPEM []byte // PKIX PEM of rsa's public key
}

var (
	jwtKeysOnce sync.Once
	jwtKeysVal  jwtKeySet
)

func jwtTestKeys(t testing.TB) *jwtKeySet {
	t.Helper()
	jwtKeysOnce.Do(func() {
		k := &jwtKeysVal
		k.hs = []byte("0123456789abcdef0123456789abcdef-test-secret")
		var err error
		if k.rsa, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if k.rsa2, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if k.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
		if k.ec2, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
		der, err := x509.MarshalPKIXPublicKey(&k.rsa.PublicKey)
		if err != nil {
			panic(err)
		}
		k.rsaPEM = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	})
	return &jwtKeysVal
}

// The test signer: header and claims are marshalled as given (so a test
// can write any alg or kid), and the signature is made with key by its
// type: []byte → HMAC-SHA256, *rsa.PrivateKey → RSASSA-PKCS1-v1_5 SHA-256,
// *ecdsa.PrivateKey → raw r||s over SHA-256, nil → no signature.

func jwtEnc(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func jwtJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func jwtSignRaw(key any, signingInput string) []byte {
	switch k := key.(type) {
	case nil:
		return nil
	case []byte:
		m := hmac.New(sha256.New, k)
		m.Write([]byte(signingInput))
		return m.Sum(nil)
	case *rsa.PrivateKey:
		d := sha256.Sum256([]byte(signingInput))
		sig, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, d[:])
		if err != nil {
			panic(err)
		}
		return sig
	case *ecdsa.PrivateKey:
		d := sha256.Sum256([]byte(signingInput))
		r, s, err := ecdsa.Sign(rand.Reader, k, d[:])
		if err != nil {
			panic(err)
		}
		sig := make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
		return sig
	}
	panic(fmt.Sprintf("signRaw: key type %T", key))
}

func jwtSign(key any, header, claims map[string]any) string {
	in := jwtEnc(jwtJSON(header)) + "." + jwtEnc(jwtJSON(claims))
	return in + "." + jwtEnc(jwtSignRaw(key, in))
}

// hdr builds a header with alg and, when not "", kid.
func jwtHdr(alg, kid string) map[string]any {
	h := map[string]any{"alg": alg, "typ": "JWT"}
	if kid != "" {
		h["kid"] = kid
	}
	return h
}

// claims returns good claims for the standard test config; extra entries
// replace or add (a nil value deletes).
func jwtClaims(extra map[string]any) map[string]any {
	c := map[string]any{
		"sub": "alice",
		"jti": "tok-1",
		"iss": "https://issuer.test",
		"aud": "tollgate",
		"iat": jwtT0.Unix(),
		"exp": jwtT0.Add(time.Hour).Unix(),
	}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

type jwtEnv struct {
	j     *Filter
	clock *jwtClock
	rev   *jwtRevList
	keys  *jwtKeySet
}

// newEnv builds a JWT over the three test keys (kids "hs", "rs", "es").
func newJWTEnv(t testing.TB, mod func(*Config)) *jwtEnv {
	t.Helper()
	k := jwtTestKeys(t)
	env := &jwtEnv{clock: newJWTClock(), rev: newJWTRevList(), keys: k}
	cfg := Config{
		Keys: []Key{
			{KID: "hs", Alg: AlgHS256, Secret: k.hs},
			{KID: "rs", Alg: AlgRS256, Public: &k.rsa.PublicKey},
			{KID: "es", Alg: AlgES256, Public: &k.ec.PublicKey},
		},
		Issuer:   "https://issuer.test",
		Audience: "tollgate",
		Now:      env.clock.Now,
		Revoked:  env.rev,
	}
	if mod != nil {
		mod(&cfg)
	}
	j, err := New(cfg)
	if err != nil {
		t.Fatalf("NewJWT: %v", err)
	}
	env.j = j
	return env
}

func (e *jwtEnv) verify(tok string) (Claims, error) { return e.j.Verify([]byte(tok)) }

// handle runs Handle with the given Authorization values (none when empty).
func jwtHandle(j *Filter, authz ...string) (pipeline.Verdict, *pipeline.Ctx, *fasthttp.Response) {
	var req fasthttp.Request
	resp := new(fasthttp.Response)
	req.Header.SetMethod("GET")
	req.SetRequestURI("/x")
	for _, a := range authz {
		req.Header.Add("Authorization", a)
	}
	c := pipeline.Acquire(&req, resp)
	v := j.Handle(c)
	return v, c, resp
}

func TestJWTValidTokens(t *testing.T) {
	env := newJWTEnv(t, nil)
	k := env.keys
	for _, tc := range []struct {
		name string
		key  any
		hdr  map[string]any
	}{
		{"HS256", k.hs, jwtHdr("HS256", "hs")},
		{"RS256", k.rsa, jwtHdr("RS256", "rs")},
		{"ES256", k.ec, jwtHdr("ES256", "es")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := jwtSign(tc.key, tc.hdr, jwtClaims(map[string]any{"nbf": jwtT0.Add(-time.Minute).Unix()}))
			for pass := 0; pass < 2; pass++ { // miss, then cache hit
				cl, err := env.verify(tok)
				if err != nil {
					t.Fatalf("pass %d: %v", pass, err)
				}
				if cl.Subject != "alice" || cl.ID != "tok-1" || !cl.Expires.Equal(jwtT0.Add(time.Hour)) || !cl.NotBefore.Equal(jwtT0.Add(-time.Minute)) {
					t.Fatalf("pass %d: claims %+v", pass, cl)
				}
			}
			v, c, resp := jwtHandle(env.j, "Bearer "+tok)
			if v != pipeline.Continue || c.Consumer != "jwt:alice" || c.UserID != "alice" {
				t.Fatalf("Handle = %v consumer %q user %q (status %d %s)", v, c.Consumer, c.UserID, resp.StatusCode(), resp.Body())
			}
		})
	}
}

func TestJWTFailures(t *testing.T) {
	k := jwtTestKeys(t)
	good := func(extra map[string]any) string { return jwtSign(k.hs, jwtHdr("HS256", "hs"), jwtClaims(extra)) }
	goodTok := good(nil)
	parts := strings.Split(goodTok, ".")
	tampered := parts[0] + "." + jwtEnc(jwtJSON(jwtClaims(map[string]any{"sub": "admin"}))) + "." + parts[2]
	rsTok := jwtSign(k.rsa, jwtHdr("RS256", "rs"), jwtClaims(nil))
	rsParts := strings.Split(rsTok, ".")
	esTok := jwtSign(k.ec, jwtHdr("ES256", "es"), jwtClaims(nil))
	esParts := strings.Split(esTok, ".")
	asn1Sig := func() string { // ES256 signed as ASN.1 DER: not JWS
		in := esParts[0] + "." + esParts[1]
		d := sha256.Sum256([]byte(in))
		sig, err := ecdsa.SignASN1(rand.Reader, k.ec, d[:])
		if err != nil {
			t.Fatal(err)
		}
		return in + "." + jwtEnc(sig)
	}()
	critTok := jwtSign(k.hs, map[string]any{"alg": "HS256", "kid": "hs", "crit": []string{"exp"}}, jwtClaims(nil))
	payloadNotJSON := func() string {
		in := parts[0] + "." + jwtEnc([]byte("not json"))
		return in + "." + jwtEnc(jwtSignRaw(k.hs, in))
	}()
	payloadArray := func() string {
		in := parts[0] + "." + jwtEnc([]byte(`["sub"]`))
		return in + "." + jwtEnc(jwtSignRaw(k.hs, in))
	}()
	headerNotJSON := func() string {
		in := jwtEnc([]byte("{alg:HS256")) + "." + parts[1]
		return in + "." + jwtEnc(jwtSignRaw(k.hs, in))
	}()

	cases := []struct {
		name string
		tok  string
		want error
	}{
		{"empty", "", ErrJWTMissing},
		{"one part", "abc", ErrJWTMalformed},
		{"two parts", "abc.def", ErrJWTMalformed},
		{"four parts", goodTok + ".x", ErrJWTMalformed},
		{"five parts (JWE)", "a.b.c.d.e", ErrJWTMalformed},
		{"bad base64", "!!!." + parts[1] + "." + parts[2], ErrJWTMalformed},
		{"padded base64", parts[0] + "=." + parts[1] + "." + parts[2], ErrJWTMalformed},
		{"line break", parts[0] + "\n." + parts[1] + "." + parts[2], ErrJWTMalformed},
		{"empty header", "." + parts[1] + "." + parts[2], ErrJWTMalformed},
		{"header not JSON", headerNotJSON, ErrJWTMalformed},
		{"payload not JSON", payloadNotJSON, ErrJWTMalformed},
		{"payload an array", payloadArray, ErrJWTMalformed},
		{"crit header", critTok, ErrJWTMalformed},
		{"no alg", jwtSign(k.hs, map[string]any{"kid": "hs"}, jwtClaims(nil)), ErrJWTMalformed},
		{"alg not a string", jwtSign(k.hs, map[string]any{"alg": 1, "kid": "hs"}, jwtClaims(nil)), ErrJWTMalformed},
		{"kid not a string", jwtSign(k.hs, map[string]any{"alg": "HS256", "kid": 7}, jwtClaims(nil)), ErrJWTMalformed},
		{"exp a string", good(map[string]any{"exp": fmt.Sprint(jwtT0.Add(time.Hour).Unix())}), ErrJWTMalformed},
		{"exp null", good(map[string]any{"exp": json.RawMessage("null")}), ErrJWTMalformed},
		{"nbf a bool", good(map[string]any{"nbf": true}), ErrJWTMalformed},
		{"iat a string", good(map[string]any{"iat": "now"}), ErrJWTMalformed},
		{"sub a number", good(map[string]any{"sub": 42}), ErrJWTMalformed},
		{"aud a number", good(map[string]any{"aud": 42}), ErrJWTMalformed},
		{"aud array with a number", good(map[string]any{"aud": []any{"tollgate", 1}}), ErrJWTMalformed},
		{"iss a number", good(map[string]any{"iss": 1}), ErrJWTMalformed},
		{"too long", good(map[string]any{"pad": strings.Repeat("x", maxJWTLen)}), ErrJWTMalformed},
		{"unknown kid", jwtSign(k.hs, jwtHdr("HS256", "nope"), jwtClaims(nil)), ErrJWTUnknownKey},
		{"alg differs from the kid's key", jwtSign(k.hs, jwtHdr("RS256", "hs"), jwtClaims(nil)), ErrJWTAlgorithm},
		{"unsupported alg", jwtSign(k.hs, jwtHdr("HS512", "hs"), jwtClaims(nil)), ErrJWTAlgorithm},
		{"alg none", jwtSign(nil, jwtHdr("none", "hs"), jwtClaims(nil)), ErrJWTAlgorithm},
		{"tampered payload", tampered, ErrJWTSignature},
		{"tampered header", jwtEnc(jwtJSON(map[string]any{"alg": "HS256", "kid": "hs", "x": 1})) + "." + parts[1] + "." + parts[2], ErrJWTSignature},
		{"empty signature", parts[0] + "." + parts[1] + ".", ErrJWTSignature},
		{"HS256 wrong secret", jwtSign([]byte("another-secret-another-secret-32b"), jwtHdr("HS256", "hs"), jwtClaims(nil)), ErrJWTSignature},
		{"RS256 other key", jwtSign(k.rsa2, jwtHdr("RS256", "rs"), jwtClaims(nil)), ErrJWTSignature},
		{"RS256 tampered", rsParts[0] + "." + jwtEnc(jwtJSON(jwtClaims(map[string]any{"sub": "admin"}))) + "." + rsParts[2], ErrJWTSignature},
		{"ES256 other key", jwtSign(k.ec2, jwtHdr("ES256", "es"), jwtClaims(nil)), ErrJWTSignature},
		{"ES256 ASN.1 signature", asn1Sig, ErrJWTSignature},
		{"ES256 tampered", esParts[0] + "." + jwtEnc(jwtJSON(jwtClaims(map[string]any{"sub": "admin"}))) + "." + esParts[2], ErrJWTSignature},
		{"no sub", good(map[string]any{"sub": nil}), ErrJWTNoSubject},
		{"empty sub", good(map[string]any{"sub": ""}), ErrJWTNoSubject},
		{"wrong issuer", good(map[string]any{"iss": "https://evil.test"}), ErrJWTIssuer},
		{"no issuer", good(map[string]any{"iss": nil}), ErrJWTIssuer},
		{"wrong audience", good(map[string]any{"aud": "other"}), ErrJWTAudience},
		{"audience array without ours", good(map[string]any{"aud": []string{"a", "b"}}), ErrJWTAudience},
		{"empty audience array", good(map[string]any{"aud": []string{}}), ErrJWTAudience},
		{"no audience", good(map[string]any{"aud": nil}), ErrJWTAudience},
		{"expired", good(map[string]any{"exp": jwtT0.Add(-time.Second).Unix()}), ErrJWTExpired},
		{"expires now", good(map[string]any{"exp": jwtT0.Unix()}), ErrJWTExpired},
		{"not yet valid", good(map[string]any{"nbf": jwtT0.Add(time.Second).Unix()}), ErrJWTNotYetValid},
		{"revoked jti", good(map[string]any{"jti": "revoked-jti"}), ErrJWTRevoked},
		{"revoked sub", good(map[string]any{"sub": "mallory", "jti": nil}), ErrJWTRevoked},
	}
	env := newJWTEnv(t, nil)
	env.rev.set("revoked-jti", "mallory", true)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for pass := 0; pass < 2; pass++ { // the answer is the same from the cache
				if _, err := env.verify(tc.tok); err != tc.want {
					t.Fatalf("pass %d: Verify = %v, want %v", pass, err, tc.want)
				}
			}
			if tc.tok == "" || strings.ContainsAny(tc.tok, "\n") {
				return
			}
			v, c, resp := jwtHandle(env.j, "Bearer "+tc.tok)
			if v != pipeline.Stop || resp.StatusCode() != 401 || c.Consumer != "" {
				t.Fatalf("Handle = %v, status %d, consumer %q", v, resp.StatusCode(), c.Consumer)
			}
			msg := strings.TrimPrefix(tc.want.Error(), "auth: ")
			if !strings.Contains(string(resp.Body()), `"message":"`+msg+`"`) {
				t.Fatalf("body %s, want message %q", resp.Body(), msg)
			}
			if got := string(resp.Header.Peek("WWW-Authenticate")); got != `Bearer error="invalid_token"` {
				t.Fatalf("WWW-Authenticate = %q", got)
			}
		})
	}
}

func TestJWTMessagesDistinct(t *testing.T) {
	seen := map[string]jwtResult{}
	for r := jwtMissing; r < jwtResults; r++ {
		c := jwtCanned[r]
		if c == nil || jwtErrors[r] == nil {
			t.Fatalf("result %d has no canned answer or error", r)
		}
		if c.Status != 401 {
			t.Fatalf("%q answers %d", c.Message, c.Status)
		}
		if prev, dup := seen[c.Message]; dup {
			t.Fatalf("results %d and %d share %q", prev, r, c.Message)
		}
		seen[c.Message] = r
		if "auth: "+c.Message != jwtErrors[r].Error() {
			t.Fatalf("canned %q and error %q differ", c.Message, jwtErrors[r])
		}
	}
}

func TestJWTHandleHeader(t *testing.T) {
	env := newJWTEnv(t, nil)
	tok := jwtSign(env.keys.hs, jwtHdr("HS256", "hs"), jwtClaims(nil))
	for _, tc := range []struct {
		name   string
		authz  []string
		ok     bool
		msg    string
		bearer bool // challenge without error code
	}{
		{"canonical", []string{"Bearer " + tok}, true, "", false},
		{"lower-case scheme", []string{"bearer " + tok}, true, "", false},
		{"upper-case scheme, extra blanks", []string{"  BEARER \t " + tok + "  "}, true, "", false},
		{"no header", nil, false, "missing bearer token", true},
		{"other scheme", []string{"Basic YWxpY2U6c2VjcmV0"}, false, "missing bearer token", true},
		{"scheme only", []string{"Bearer"}, false, "missing bearer token", true},
		{"scheme and blanks", []string{"Bearer   "}, false, "missing bearer token", true},
		{"scheme glued to token", []string{"Bearer" + tok}, false, "missing bearer token", true},
		{"two fields", []string{"Bearer " + tok, "Bearer " + tok}, false, "malformed JWT", false},
		{"garbage token", []string{"Bearer a b"}, false, "malformed JWT", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, c, resp := jwtHandle(env.j, tc.authz...)
			if tc.ok {
				if v != pipeline.Continue || c.Consumer != "jwt:alice" {
					t.Fatalf("Handle = %v, consumer %q, body %s", v, c.Consumer, resp.Body())
				}
				return
			}
			if v != pipeline.Stop || resp.StatusCode() != 401 {
				t.Fatalf("Handle = %v, status %d", v, resp.StatusCode())
			}
			if !strings.Contains(string(resp.Body()), `"message":"`+tc.msg+`"`) {
				t.Fatalf("body %s, want %q", resp.Body(), tc.msg)
			}
			want := `Bearer error="invalid_token"`
			if tc.bearer {
				want = "Bearer"
			}
			if got := string(resp.Header.Peek("WWW-Authenticate")); got != want {
				t.Fatalf("WWW-Authenticate = %q, want %q", got, want)
			}
			if c.Decision != tc.msg {
				t.Fatalf("Decision = %q", c.Decision)
			}
		})
	}

	t.Run("header name in lower case on the wire", func(t *testing.T) {
		var req fasthttp.Request
		var resp fasthttp.Response
		raw := "GET /x HTTP/1.1\r\nHost: a\r\nauthorization: bearer " + tok + "\r\n\r\n"
		if err := req.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
			t.Fatal(err)
		}
		c := pipeline.Acquire(&req, &resp)
		defer pipeline.Release(c)
		if v := env.j.Handle(c); v != pipeline.Continue || c.Consumer != "jwt:alice" {
			t.Fatalf("Handle = %v, body %s", v, resp.Body())
		}
	})
}

func TestJWTAlgConfusion(t *testing.T) {
	k := jwtTestKeys(t)
	der, err := x509.MarshalPKIXPublicKey(&k.rsa.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pkcs1 := x509.MarshalPKCS1PublicKey(&k.rsa.PublicKey)
	secrets := map[string][]byte{"PEM": k.rsaPEM, "DER": der, "PKCS1": pkcs1}
	rsaOnly := func(kid string) *Filter {
		j, err := New(Config{Keys: []Key{{KID: kid, Public: &k.rsa.PublicKey}}, Now: newJWTClock().Now})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	for name, secret := range secrets {
		for _, kid := range []string{"rs", ""} {
			t.Run(fmt.Sprintf("HS256 with the RSA key's %s bytes, kid %q", name, kid), func(t *testing.T) {
				j := rsaOnly(kid)
				tok := jwtSign(secret, jwtHdr("HS256", kid), jwtClaims(nil))
				if _, err := j.Verify([]byte(tok)); err != ErrJWTAlgorithm {
					t.Fatalf("Verify = %v, want %v", err, ErrJWTAlgorithm)
				}
			})
		}
	}
	t.Run("HS256 token against a mixed key set", func(t *testing.T) {
		// No kid, several keys: only the HS256 key is tried, and the RSA
		// key's bytes are not its secret.
		j, err := New(Config{
			Keys: []Key{{Public: &k.rsa.PublicKey}, {Secret: k.hs}, {Public: &k.ec.PublicKey}},
			Now:  newJWTClock().Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		tok := jwtSign(k.rsaPEM, jwtHdr("HS256", ""), jwtClaims(nil))
		if _, err := j.Verify([]byte(tok)); err != ErrJWTSignature {
			t.Fatalf("Verify = %v, want %v", err, ErrJWTSignature)
		}
		// The real secret works, and so do the others.
		for _, tc := range []struct {
			key any
			alg string
		}{{k.hs, "HS256"}, {k.rsa, "RS256"}, {k.ec, "ES256"}} {
			if _, err := j.Verify([]byte(jwtSign(tc.key, jwtHdr(tc.alg, ""), jwtClaims(nil)))); err != nil {
				t.Fatalf("%s: %v", tc.alg, err)
			}
		}
	})
	t.Run("RS256 and ES256 tokens against an HS256 key", func(t *testing.T) {
		j, err := New(Config{Keys: []Key{{KID: "hs", Secret: k.hs}}, Now: newJWTClock().Now})
		if err != nil {
			t.Fatal(err)
		}
		for _, tok := range []string{
			jwtSign(k.rsa, jwtHdr("RS256", "hs"), jwtClaims(nil)),
			jwtSign(k.ec, jwtHdr("ES256", ""), jwtClaims(nil)),
			jwtSign(k.hs, jwtHdr("RS256", ""), jwtClaims(nil)), // HMAC bytes under an RS256 header
		} {
			if _, err := j.Verify([]byte(tok)); err != ErrJWTAlgorithm {
				t.Fatalf("Verify = %v, want %v", err, ErrJWTAlgorithm)
			}
		}
	})
	t.Run("ES256 token against an RS256 key", func(t *testing.T) {
		j := rsaOnly("k")
		if _, err := j.Verify([]byte(jwtSign(k.ec, jwtHdr("ES256", "k"), jwtClaims(nil)))); err != ErrJWTAlgorithm {
			t.Fatalf("Verify = %v, want %v", err, ErrJWTAlgorithm)
		}
	})
}

func TestJWTAlgNone(t *testing.T) {
	env := newJWTEnv(t, func(c *Config) { c.Keys = c.Keys[:1] }) // the HS256 key alone
	k := env.keys
	for _, alg := range []string{"none", "None", "NONE", "nOnE", ""} {
		for _, kid := range []string{"hs", ""} {
			unsigned := jwtSign(nil, jwtHdr(alg, kid), jwtClaims(nil))
			withSig := jwtSign(k.hs, jwtHdr(alg, kid), jwtClaims(nil)) // a real HMAC does not help
			for _, tok := range []string{unsigned, withSig} {
				if _, err := env.verify(tok); err != ErrJWTAlgorithm {
					t.Fatalf("alg %q kid %q: Verify = %v, want %v", alg, kid, err, ErrJWTAlgorithm)
				}
			}
		}
	}
}

func TestJWTLeeway(t *testing.T) {
	const leeway = 30 * time.Second
	exp := jwtT0.Add(time.Hour)
	nbf := jwtT0.Add(10 * time.Minute)
	for _, tc := range []struct {
		name   string
		leeway time.Duration
		at     time.Time
		want   error
	}{
		{"before nbf, beyond leeway", leeway, nbf.Add(-leeway - time.Nanosecond), ErrJWTNotYetValid},
		{"before nbf, at leeway", leeway, nbf.Add(-leeway), nil},
		{"at exp", leeway, exp, nil},
		{"after exp, within leeway", leeway, exp.Add(leeway - time.Nanosecond), nil},
		{"after exp, at leeway", leeway, exp.Add(leeway), ErrJWTExpired},
		{"no leeway: just before nbf", 0, nbf.Add(-time.Nanosecond), ErrJWTNotYetValid},
		{"no leeway: at nbf", 0, nbf, nil},
		{"no leeway: just before exp", 0, exp.Add(-time.Nanosecond), nil},
		{"no leeway: at exp", 0, exp, ErrJWTExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newJWTEnv(t, func(c *Config) { c.Leeway = tc.leeway })
			tok := jwtSign(env.keys.hs, jwtHdr("HS256", "hs"), jwtClaims(map[string]any{"exp": exp.Unix(), "nbf": nbf.Unix()}))
			// Uncached at tc.at.
			env.clock.Set(tc.at)
			if _, err := env.verify(tok); err != tc.want {
				t.Fatalf("uncached: Verify = %v, want %v", err, tc.want)
			}
			// Cached at a good time, then checked at tc.at.
			env2 := newJWTEnv(t, func(c *Config) { c.Leeway = tc.leeway })
			env2.clock.Set(nbf.Add(time.Minute))
			if _, err := env2.verify(tok); err != nil {
				t.Fatalf("warming the cache: %v", err)
			}
			env2.clock.Set(tc.at)
			if _, err := env2.verify(tok); err != tc.want {
				t.Fatalf("cached: Verify = %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("fractional dates", func(t *testing.T) {
		env := newJWTEnv(t, nil)
		tok := jwtSign(env.keys.hs, jwtHdr("HS256", "hs"), jwtClaims(map[string]any{"exp": float64(jwtT0.Unix()) + 0.5}))
		env.clock.Set(jwtT0.Add(499 * time.Millisecond))
		if _, err := env.verify(tok); err != nil {
			t.Fatalf("before exp: %v", err)
		}
		env.clock.Set(jwtT0.Add(500 * time.Millisecond))
		if _, err := env.verify(tok); err != ErrJWTExpired {
			t.Fatalf("at exp: %v", err)
		}
	})
	t.Run("no exp, huge exp", func(t *testing.T) {
		env := newJWTEnv(t, func(c *Config) { c.ExpOptional = true })
		for _, extra := range []map[string]any{{"exp": nil}, {"exp": 1e300}, {"nbf": -1e300}} {
			cl, err := env.verify(jwtSign(env.keys.hs, jwtHdr("HS256", "hs"), jwtClaims(extra)))
			if err != nil {
				t.Fatalf("%v: %v", extra, err)
			}
			if v, set := extra["exp"]; set && v == nil && !cl.Expires.IsZero() {
				t.Fatalf("Expires = %v, want zero", cl.Expires)
			}
		}
	})
}

func TestJWTAudience(t *testing.T) {
	k := jwtTestKeys(t)
	for _, tc := range []struct {
		name     string
		audience string
		aud      any
		want     error
	}{
		{"string", "tollgate", "tollgate", nil},
		{"array with ours", "tollgate", []string{"billing", "tollgate"}, nil},
		{"array of one", "tollgate", []string{"tollgate"}, nil},
		{"array without ours", "tollgate", []string{"billing"}, ErrJWTAudience},
		{"case differs", "tollgate", "Tollgate", ErrJWTAudience},
		{"not configured, any", "", "whatever", nil},
		{"not configured, absent", "", nil, nil},
		{"not configured, array", "", []string{"a", "b"}, nil},
		{"not configured, still well-formed", "", 7, ErrJWTMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := New(Config{Keys: []Key{{Secret: k.hs}}, Audience: tc.audience, Now: newJWTClock().Now})
			if err != nil {
				t.Fatal(err)
			}
			tok := jwtSign(k.hs, jwtHdr("HS256", ""), jwtClaims(map[string]any{"aud": tc.aud}))
			if _, err := j.Verify([]byte(tok)); err != tc.want {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestJWTIssuerOptional(t *testing.T) {
	k := jwtTestKeys(t)
	j, err := New(Config{Keys: []Key{{Secret: k.hs}}, Now: newJWTClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	for _, iss := range []any{nil, "anyone"} {
		if _, err := j.Verify([]byte(jwtSign(k.hs, jwtHdr("HS256", ""), jwtClaims(map[string]any{"iss": iss})))); err != nil {
			t.Fatalf("iss %v: %v", iss, err)
		}
	}
}

func TestJWTKidSelection(t *testing.T) {
	k := jwtTestKeys(t)
	now := newJWTClock().Now
	t.Run("kid picks the key", func(t *testing.T) {
		j, err := New(Config{Now: now, Keys: []Key{
			{KID: "a", Public: &k.rsa.PublicKey},
			{KID: "b", Public: &k.rsa2.PublicKey},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.Verify([]byte(jwtSign(k.rsa2, jwtHdr("RS256", "b"), jwtClaims(nil)))); err != nil {
			t.Fatalf("kid b: %v", err)
		}
		// Signed by b's key but naming a: a's key alone is tried.
		if _, err := j.Verify([]byte(jwtSign(k.rsa2, jwtHdr("RS256", "a"), jwtClaims(nil)))); err != ErrJWTSignature {
			t.Fatalf("kid a, signed by b: %v", err)
		}
		if _, err := j.Verify([]byte(jwtSign(k.rsa2, jwtHdr("RS256", "c"), jwtClaims(nil)))); err != ErrJWTUnknownKey {
			t.Fatalf("kid c: %v", err)
		}
	})
	t.Run("no kid, several keys: those of the token's alg", func(t *testing.T) {
		j, err := New(Config{Now: now, Keys: []Key{
			{KID: "a", Public: &k.rsa.PublicKey},
			{KID: "e", Public: &k.ec.PublicKey},
			{KID: "b", Public: &k.rsa2.PublicKey},
		}})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			key  any
			alg  string
			want error
		}{
			{k.rsa2, "RS256", nil},
			{k.rsa, "RS256", nil},
			{k.ec, "ES256", nil},
			{k.ec2, "ES256", ErrJWTSignature},
			{k.hs, "HS256", ErrJWTAlgorithm},
		} {
			if _, err := j.Verify([]byte(jwtSign(tc.key, jwtHdr(tc.alg, ""), jwtClaims(nil)))); err != tc.want {
				t.Fatalf("%s: %v, want %v", tc.alg, err, tc.want)
			}
		}
	})
	t.Run("no kid, one key", func(t *testing.T) {
		j, err := New(Config{Now: now, Keys: []Key{{KID: "only", Public: &k.ec.PublicKey}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.Verify([]byte(jwtSign(k.ec, jwtHdr("ES256", ""), jwtClaims(nil)))); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("unknown kid falls back to keys without an id", func(t *testing.T) {
		j, err := New(Config{Now: now, Keys: []Key{
			{KID: "a", Public: &k.rsa.PublicKey},
			{Secret: k.hs},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.Verify([]byte(jwtSign(k.hs, jwtHdr("HS256", "issuer-key-7"), jwtClaims(nil)))); err != nil {
			t.Fatalf("anonymous HS256 key: %v", err)
		}
		if _, err := j.Verify([]byte(jwtSign(k.rsa2, jwtHdr("RS256", "issuer-key-7"), jwtClaims(nil)))); err != ErrJWTAlgorithm {
			t.Fatalf("RS256 with an unknown kid and only an anonymous HS256 key: %v", err)
		}
	})
}

func TestNewJWTErrors(t *testing.T) {
	k := jwtTestKeys(t)
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no keys", Config{}, "at least one key"},
		{"short secret", Config{Keys: []Key{{Secret: []byte("short")}}}, "needs at least 32"},
		{"small RSA", Config{Keys: []Key{{Public: &small.PublicKey}}}, "needs at least 2048"},
		{"P-384", Config{Keys: []Key{{Public: &p384.PublicKey}}}, "P-256"},
		{"ed25519", Config{Keys: []Key{{Public: edPub}}}, "unsupported public key type"},
		{"HS256 with a public key", Config{Keys: []Key{{Alg: AlgHS256, Secret: k.hs, Public: &k.rsa.PublicKey}}}, "not a public key"},
		{"RS256 with an EC key", Config{Keys: []Key{{Alg: AlgRS256, Public: &k.ec.PublicKey}}}, "needs an *rsa.PublicKey"},
		{"ES256 with an RSA key", Config{Keys: []Key{{Alg: AlgES256, Public: &k.rsa.PublicKey}}}, "needs an *ecdsa.PublicKey"},
		{"RS256 with a secret too", Config{Keys: []Key{{Alg: AlgRS256, Public: &k.rsa.PublicKey, Secret: k.hs}}}, "not a secret"},
		{"alg none", Config{Keys: []Key{{Alg: "none", Secret: k.hs}}}, "unsupported algorithm"},
		{"alg RS512", Config{Keys: []Key{{Alg: "RS512", Public: &k.rsa.PublicKey}}}, "unsupported algorithm"},
		{"duplicate kid", Config{Keys: []Key{{KID: "x", Secret: k.hs}, {KID: "x", Public: &k.rsa.PublicKey}}}, "defined twice"},
		{"negative leeway", Config{Keys: []Key{{Secret: k.hs}}, Leeway: -time.Second}, "leeway"},
		{"huge leeway", Config{Keys: []Key{{Secret: k.hs}}, Leeway: 48 * time.Hour}, "leeway"},
		{"negative cache", Config{Keys: []Key{{Secret: k.hs}}, CacheSize: -1}, "cache size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) || j != nil {
				t.Fatalf("NewJWT = %v, %v; want an error with %q", j, err, tc.want)
			}
		})
	}
	t.Run("secret is copied", func(t *testing.T) {
		secret := append([]byte(nil), k.hs...)
		j, err := New(Config{Keys: []Key{{Secret: secret}}, Now: newJWTClock().Now})
		if err != nil {
			t.Fatal(err)
		}
		tok := jwtSign(k.hs, jwtHdr("HS256", ""), jwtClaims(nil))
		secret[0] ^= 0xff
		if _, err := j.Verify([]byte(tok)); err != nil {
			t.Fatalf("after the caller changed its slice: %v", err)
		}
	})
}

func TestJWTRevocationOfCachedToken(t *testing.T) {
	env := newJWTEnv(t, nil)
	tok := []byte(jwtSign(env.keys.rsa, jwtHdr("RS256", "rs"), jwtClaims(map[string]any{"jti": "j-42", "sub": "bob"})))
	if _, err := env.j.Verify(tok); err != nil {
		t.Fatal(err)
	}
	h := xxhash.Sum64(tok)
	if _, hit := env.j.cache.Get(h, tok); !hit {
		t.Fatal("a verified token is not cached")
	}
	steps := []struct {
		jti, sub string
		on       bool
		want     error
	}{
		{"j-42", "", true, ErrJWTRevoked},
		{"j-42", "", false, nil},
		{"", "bob", true, ErrJWTRevoked},
		{"", "bob", false, nil},
		{"j-other", "carol", true, nil},
	}
	for i, s := range steps {
		env.rev.set(s.jti, s.sub, s.on)
		asks := env.rev.asks.Load()
		if _, err := env.j.Verify(tok); err != s.want {
			t.Fatalf("step %d: Verify = %v, want %v", i, err, s.want)
		}
		if env.rev.asks.Load() != asks+1 {
			t.Fatalf("step %d: the revocation list was not asked", i)
		}
		v, c, _ := jwtHandle(env.j, "Bearer "+string(tok))
		if (v == pipeline.Continue) != (s.want == nil) || (s.want == nil && c.Consumer != "jwt:bob") {
			t.Fatalf("step %d: Handle = %v, consumer %q", i, v, c.Consumer)
		}
	}
	if n := env.j.cache.Len(); n != 1 {
		t.Fatalf("cache holds %d tokens, want 1", n)
	}
}

func TestJWTCacheBound(t *testing.T) {
	for _, size := range []int{1, 7, 16, 100, 1000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			env := newJWTEnv(t, func(c *Config) { c.CacheSize = size })
			var last []byte
			for i := 0; i < 3*size+50; i++ {
				last = []byte(jwtSign(env.keys.hs, jwtHdr("HS256", "hs"), jwtClaims(map[string]any{"jti": fmt.Sprint("t", i)})))
				if _, err := env.j.Verify(last); err != nil {
					t.Fatal(err)
				}
				if n := env.j.cache.Len(); n > size {
					t.Fatalf("after %d tokens the cache holds %d, bound %d", i+1, n, size)
				}
			}
			if _, hit := env.j.cache.Get(xxhash.Sum64(last), last); !hit {
				t.Fatal("the newest token was not cached")
			}
		})
	}
	t.Run("default", func(t *testing.T) {
		env := newJWTEnv(t, nil)
		if got := env.j.cache.Cap(); got != DefaultJWTCacheSize {
			t.Fatalf("default capacity %d", got)
		}
	})
}

func TestJWTCacheCollision(t *testing.T) {
	env := newJWTEnv(t, nil)
	a := []byte(jwtSign(env.keys.hs, jwtHdr("HS256", "hs"), jwtClaims(map[string]any{"sub": "alice"})))
	b := []byte(jwtSign(env.keys.hs, jwtHdr("HS256", "hs"), jwtClaims(map[string]any{"sub": "bob"})))
	// Pretend b hashes like a: a's entry is stored under b's hash.
	ea := newJWTEntry(a, "alice", "", jwtT0.Add(time.Hour).UnixNano(), 0)
	ea.hash = xxhash.Sum64(b)
	env.j.cache.Put(ea, jwtT0.UnixNano())
	if _, hit := env.j.cache.Get(ea.hash, b); hit {
		t.Fatal("a lookup matched another token's bytes")
	}
	cl, err := env.j.Verify(b)
	if err != nil || cl.Subject != "bob" {
		t.Fatalf("Verify = %+v, %v; want bob", cl, err)
	}
	if e, hit := env.j.cache.Get(xxhash.Sum64(b), b); !hit || e.sub != "bob" {
		t.Fatal("b did not replace the colliding entry")
	}
}

func TestJWTConcurrent(t *testing.T) {
	env := newJWTEnv(t, func(c *Config) { c.CacheSize = 32 })
	k := env.keys
	var toks [][]byte
	for i := 0; i < 64; i++ {
		var tok string
		switch i % 3 {
		case 0:
			tok = jwtSign(k.hs, jwtHdr("HS256", "hs"), jwtClaims(map[string]any{"jti": fmt.Sprint("c", i), "sub": fmt.Sprint("u", i)}))
		case 1:
			tok = jwtSign(k.rsa, jwtHdr("RS256", "rs"), jwtClaims(map[string]any{"jti": fmt.Sprint("c", i), "sub": fmt.Sprint("u", i)}))
		default:
			tok = jwtSign(k.ec, jwtHdr("ES256", "es"), jwtClaims(map[string]any{"jti": fmt.Sprint("c", i), "sub": fmt.Sprint("u", i)}))
		}
		toks = append(toks, []byte(tok))
	}
	env.rev.set("c5", "", true)
	var wg sync.WaitGroup
	var bad atomic.Int64
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 400; i++ {
				n := (i*7 + g) % len(toks)
				cl, err := env.j.Verify(toks[n])
				switch {
				case n == 5 && err != ErrJWTRevoked:
					bad.Add(1)
				case n != 5 && (err != nil || cl.Subject != fmt.Sprint("u", n)):
					bad.Add(1)
				}
			}
		}(g)
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d wrong answers", bad.Load())
	}
	if n := env.j.cache.Len(); n > 32 {
		t.Fatalf("cache holds %d", n)
	}
}

// Key files.

func jwtWriteFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func jwkRSA(kid string, pub *rsa.PublicKey) map[string]any {
	return map[string]any{
		"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
		"n": jwtEnc(pub.N.Bytes()),
		"e": jwtEnc(big.NewInt(int64(pub.E)).Bytes()),
	}
}

func jwkEC(kid string, pub *ecdsa.PublicKey) map[string]any {
	raw, err := pub.Bytes()
	if err != nil {
		panic(err)
	}
	return map[string]any{"kty": "EC", "kid": kid, "crv": "P-256", "x": jwtEnc(raw[1:33]), "y": jwtEnc(raw[33:])}
}

func TestLoadJWKS(t *testing.T) {
	k := jwtTestKeys(t)
	encKey := jwkRSA("enc-1", &k.rsa2.PublicKey)
	encKey["use"] = "enc"
	encKey["alg"] = "RSA-OAEP"
	set := map[string]any{"keys": []any{
		jwkRSA("rsa-1", &k.rsa.PublicKey),
		encKey,
		jwkEC("ec-1", &k.ec.PublicKey),
		map[string]any{"kty": "oct", "kid": "hs-1", "k": jwtEnc(k.hs), "alg": "HS256"},
	}}
	keys, err := LoadJWKS(jwtWriteFile(t, "jwks.json", jwtJSON(set)))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 {
		t.Fatalf("got %d keys, want 3 (the enc key skipped)", len(keys))
	}
	want := []struct{ kid, alg string }{{"rsa-1", AlgRS256}, {"ec-1", AlgES256}, {"hs-1", AlgHS256}}
	for i, w := range want {
		if keys[i].KID != w.kid || keys[i].Alg != w.alg {
			t.Fatalf("key %d = %s/%s, want %s/%s", i, keys[i].KID, keys[i].Alg, w.kid, w.alg)
		}
	}
	j, err := New(Config{Keys: keys, Now: newJWTClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  any
		hdr  map[string]any
		want error
	}{
		{k.rsa, jwtHdr("RS256", "rsa-1"), nil},
		{k.ec, jwtHdr("ES256", "ec-1"), nil},
		{k.hs, jwtHdr("HS256", "hs-1"), nil},
		{k.rsa2, jwtHdr("RS256", "enc-1"), ErrJWTUnknownKey},
	} {
		if _, err := j.Verify([]byte(jwtSign(tc.key, tc.hdr, jwtClaims(nil)))); err != tc.want {
			t.Fatalf("%v: Verify = %v, want %v", tc.hdr, err, tc.want)
		}
	}

	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p384JWK := jwkEC("p384", &p384.PublicKey)
	p384JWK["crv"] = "P-384"
	offCurve := jwkEC("bad", &k.ec.PublicKey)
	offCurve["y"] = offCurve["x"]
	rsaPS := jwkRSA("ps", &k.rsa.PublicKey)
	rsaPS["alg"] = "PS256"
	for _, tc := range []struct {
		name string
		data string
		want string
	}{
		{"not JSON", "{", "not a JWK set"},
		{"no keys", `{"keys":[]}`, "no signature keys"},
		{"only enc keys", string(jwtJSON(map[string]any{"keys": []any{encKey}})), "no signature keys"},
		{"unknown kty", `{"keys":[{"kty":"OKP","kid":"ed","crv":"Ed25519","x":"AAAA"}]}`, `unsupported kty "OKP"`},
		{"missing kty", `{"keys":[{"kid":"x"}]}`, `missing "kty"`},
		{"EC P-384", string(jwtJSON(map[string]any{"keys": []any{p384JWK}})), `curve "P-384" not supported`},
		{"EC point off the curve", string(jwtJSON(map[string]any{"keys": []any{offCurve}})), "invalid P-256 point"},
		{"RSA alg PS256", string(jwtJSON(map[string]any{"keys": []any{rsaPS}})), `alg "PS256" not supported`},
		{"RSA without n", `{"keys":[{"kty":"RSA","e":"AQAB"}]}`, `missing "n"`},
		{"RSA bad base64", `{"keys":[{"kty":"RSA","n":"!!","e":"AQAB"}]}`, "not base64url"},
		{"RSA huge e", `{"keys":[{"kty":"RSA","n":"AQAB","e":"AQABAQAB"}]}`, "out of range"},
		{"EC short x", `{"keys":[{"kty":"EC","crv":"P-256","x":"AQAB","y":"AQAB"}]}`, "32 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, err := LoadJWKS(jwtWriteFile(t, "jwks.json", []byte(tc.data)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("LoadJWKS = %v, %v; want an error with %q", keys, err, tc.want)
			}
		})
	}
	if _, err := LoadJWKS(filepath.Join(t.TempDir(), "absent.json")); err == nil {
		t.Fatal("a missing file loaded")
	}
}

func TestLoadPEMKey(t *testing.T) {
	k := jwtTestKeys(t)
	pemOf := func(typ string, der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}) }
	ecDER, err := x509.MarshalPKIXPublicKey(&k.ec.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "issuer.test"},
		NotBefore:    jwtT0.Add(-time.Hour),
		NotAfter:     jwtT0.Add(time.Hour),
	}
	certDER, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.ec2.PublicKey, k.ec2)
	if err != nil {
		t.Fatal(err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(k.ec)
	if err != nil {
		t.Fatal(err)
	}
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	edDER, err := x509.MarshalPKIXPublicKey(edPub)
	if err != nil {
		t.Fatal(err)
	}

	ok := []struct {
		name string
		data []byte
		key  any // private key that signs for it
		alg  string
	}{
		{"PKIX RSA", k.rsaPEM, k.rsa, "RS256"},
		{"PKCS1 RSA", pemOf("RSA PUBLIC KEY", x509.MarshalPKCS1PublicKey(&k.rsa.PublicKey)), k.rsa, "RS256"},
		{"PKIX EC", pemOf("PUBLIC KEY", ecDER), k.ec, "ES256"},
		{"certificate", pemOf("CERTIFICATE", certDER), k.ec2, "ES256"},
		{"after other blocks", append(append([]byte("comment\n"), pemOf("EC PARAMETERS", []byte{6, 8, 42, 134, 72, 206, 61, 3, 1, 7})...), pemOf("PUBLIC KEY", ecDER)...), k.ec, "ES256"},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			pub, err := LoadPEMKey(jwtWriteFile(t, "key.pem", tc.data))
			if err != nil {
				t.Fatal(err)
			}
			j, err := New(Config{Keys: []Key{{KID: "k", Public: pub}}, Now: newJWTClock().Now})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := j.Verify([]byte(jwtSign(tc.key, jwtHdr(tc.alg, "k"), jwtClaims(nil)))); err != nil {
				t.Fatal(err)
			}
		})
	}
	bad := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "no PEM block"},
		{"no key block", pemOf("EC PARAMETERS", []byte{6, 8, 42, 134, 72, 206, 61, 3, 1, 7}), "no PUBLIC KEY"},
		{"private key", pemOf("PRIVATE KEY", privDER), "needs only the public key"},
		{"ed25519", pemOf("PUBLIC KEY", edDER), "unsupported key type"},
		{"corrupt", pemOf("PUBLIC KEY", []byte{1, 2, 3}), "PUBLIC KEY block"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			pub, err := LoadPEMKey(jwtWriteFile(t, "key.pem", tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("LoadPEMKey = %v, %v; want an error with %q", pub, err, tc.want)
			}
		})
	}
	if _, err := LoadPEMKey(filepath.Join(t.TempDir(), "absent.pem")); err == nil {
		t.Fatal("a missing file loaded")
	}
}

// Sanity check for the test signer itself: an ES256 signature is 64 bytes.
func TestJWTTestSigner(t *testing.T) {
	k := jwtTestKeys(t)
	if n := len(jwtSignRaw(k.ec, "x")); n != 64 {
		t.Fatalf("ES256 signature is %d bytes", n)
	}
}

// FuzzJWTVerify feeds arbitrary bytes to the verifier: it must not panic,
// and whatever it accepts must carry a subject and verify again.
func FuzzJWTVerify(f *testing.F) {
	env := newJWTEnv(f, nil)
	k := env.keys
	good := jwtSign(k.hs, jwtHdr("HS256", "hs"), jwtClaims(nil))
	f.Add([]byte(good))
	f.Add([]byte(jwtSign(k.ec, jwtHdr("ES256", "es"), jwtClaims(map[string]any{"aud": []string{"x", "tollgate"}}))))
	f.Add([]byte(jwtSign(nil, jwtHdr("none", ""), jwtClaims(nil))))
	f.Add([]byte("a.b.c"))
	f.Add([]byte(".."))
	f.Add([]byte(good[:len(good)-3]))
	f.Fuzz(func(t *testing.T, tok []byte) {
		cl, err := env.j.Verify(tok)
		if err != nil {
			return
		}
		if cl.Subject == "" {
			t.Fatalf("accepted %q without a subject", tok)
		}
		if _, err := env.j.Verify(tok); err != nil {
			t.Fatalf("accepted %q, then refused it: %v", tok, err)
		}
	})
}

// TestJWTExpRequired: a token without "exp" would never expire, so it is
// refused unless the configuration says tokens may omit it.
func TestJWTExpRequired(t *testing.T) {
	k := jwtTestKeys(t)
	noExp := jwtSign(k.hs, jwtHdr("HS256", "hs"), jwtClaims(map[string]any{"exp": nil}))
	env := newJWTEnv(t, nil)
	for pass := range 2 { // verified, then cached
		if _, err := env.verify(noExp); err != ErrJWTNoExpiry {
			t.Fatalf("pass %d: Verify = %v, want ErrJWTNoExpiry", pass, err)
		}
		v, c, resp := jwtHandle(env.j, "Bearer "+noExp)
		if v != pipeline.Stop || resp.StatusCode() != 401 || c.Consumer != "" ||
			!strings.Contains(string(resp.Body()), `"message":"JWT has no expiry (exp claim required)"`) ||
			string(resp.Header.Peek("WWW-Authenticate")) != `Bearer error="invalid_token"` {
			t.Fatalf("pass %d: Handle = %v %d %s", pass, v, resp.StatusCode(), resp.Body())
		}
	}
	// A far expiry is an expiry.
	far := jwtSign(k.hs, jwtHdr("HS256", "hs"), jwtClaims(map[string]any{"exp": 1e300}))
	if _, err := env.verify(far); err != nil {
		t.Fatalf("far exp: %v", err)
	}

	opt := newJWTEnv(t, func(c *Config) { c.ExpOptional = true })
	opt.clock.Add(100 * 365 * 24 * time.Hour)
	cl, err := opt.verify(noExp)
	if err != nil || !cl.Expires.IsZero() {
		t.Fatalf("ExpOptional: %v %v", cl, err)
	}
	// Optional exp is still checked when present.
	if _, err := opt.verify(jwtSign(k.hs, jwtHdr("HS256", "hs"), jwtClaims(nil))); err != ErrJWTExpired {
		t.Fatalf("ExpOptional, expired token: %v", err)
	}
}

// TestJWTConsumerNamespace: a token's subject names the caller as
// "jwt:<sub>", never as a signed consumer's app key, even when the two
// spell the same; X-User-Id stays the subject.
func TestJWTConsumerNamespace(t *testing.T) {
	env := newJWTEnv(t, nil)
	tok := jwtSign(env.keys.hs, jwtHdr("HS256", "hs"), jwtClaims(map[string]any{"sub": "demo-app"}))
	for pass := range 2 {
		v, c, resp := jwtHandle(env.j, "Bearer "+tok)
		if v != pipeline.Continue || c.Consumer != "jwt:demo-app" || c.UserID != "demo-app" {
			t.Fatalf("pass %d: Handle = %v consumer %q user %q %s", pass, v, c.Consumer, c.UserID, resp.Body())
		}
	}
}

// memberSet is a revocation set as the cluster keeps one: members
// "jti:<id>" and "sub:<subject>", looked up whole.
type memberSet map[string]bool

func (m memberSet) Revoked(jti, sub []byte) bool {
	return (len(jti) > 0 && m[string(jti)]) || m[string(sub)]
}

// TestJWTRevocationLongIDs: ids and subjects of any length are checked
// against the revocation set, whole: none is let through for being long,
// and none matches a member that is only its prefix.
func TestJWTRevocationLongIDs(t *testing.T) {
	k := jwtTestKeys(t)
	long := func(c byte, n int) string { return strings.Repeat(string(c), n) }
	set := memberSet{}
	env := newJWTEnv(t, func(c *Config) { c.Revoked = set })
	for _, tc := range []struct {
		name     string
		claims   map[string]any
		member   string
		innocent map[string]any // a token the revocation must not hit
	}{
		{"jti of 253 bytes", map[string]any{"jti": long('j', 253)}, "jti:" + long('j', 253),
			map[string]any{"jti": long('j', 252)}},
		{"jti of 5000 bytes", map[string]any{"jti": long('J', 5000)}, "jti:" + long('J', 5000),
			map[string]any{"jti": long('J', 5000) + "x"}},
		{"sub of 300 bytes", map[string]any{"sub": long('s', 300), "jti": nil}, "sub:" + long('s', 300),
			map[string]any{"sub": long('s', 299), "jti": nil}},
		{"sub of 9000 bytes", map[string]any{"sub": long('S', 9000)}, "sub:" + long('S', 9000),
			map[string]any{"sub": long('S', 8999)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := jwtSign(k.hs, jwtHdr("HS256", "hs"), jwtClaims(tc.claims))
			other := jwtSign(k.hs, jwtHdr("HS256", "hs"), jwtClaims(tc.innocent))
			for _, s := range []string{tok, other} {
				if _, err := env.verify(s); err != nil {
					t.Fatalf("before the revocation: %v", err)
				}
			}
			set[tc.member] = true
			if _, err := env.verify(tok); err != ErrJWTRevoked {
				t.Fatalf("Verify = %v, want ErrJWTRevoked", err)
			}
			if v, _, resp := jwtHandle(env.j, "Bearer "+tok); v != pipeline.Stop || !strings.Contains(string(resp.Body()), "revoked") {
				t.Fatalf("Handle = %v %s", v, resp.Body())
			}
			if _, err := env.verify(other); err != nil {
				t.Fatalf("a token with a neighbouring id was hit: %v", err)
			}
		})
	}
}
