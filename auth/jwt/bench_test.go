package jwt

import (
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/pipeline"
)

// BenchmarkJWTHandleCached is the steady state: Handle on a request whose
// RS256 token is in the cache (header scan, hash, lookup, clock,
// revocation list).
func BenchmarkJWTHandleCached(b *testing.B) {
	env := newJWTEnv(b, nil)
	tok := jwtSign(env.keys.rsa, jwtHdr("RS256", "rs"), jwtClaims(nil))
	var req fasthttp.Request
	var resp fasthttp.Response
	req.Header.SetMethod("GET")
	req.SetRequestURI("/api/orders")
	req.Header.Set("User-Agent", "bench")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	b.ReportAllocs()
	for b.Loop() {
		c := pipeline.Acquire(&req, &resp)
		if env.j.Handle(c) != pipeline.Continue {
			b.Fatal(string(resp.Body()))
		}
		pipeline.Release(c)
	}
}

// BenchmarkJWTHandleCachedParallel is the same from every core, on a few
// distinct tokens (a shard's read lock is the only shared write).
func BenchmarkJWTHandleCachedParallel(b *testing.B) {
	env := newJWTEnv(b, nil)
	var toks []string
	for _, sub := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		toks = append(toks, "Bearer "+jwtSign(env.keys.hs, jwtHdr("HS256", "hs"), jwtClaims(map[string]any{"sub": sub})))
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var req fasthttp.Request
		var resp fasthttp.Response
		req.Header.SetMethod("GET")
		req.SetRequestURI("/api/orders")
		i := 0
		for pb.Next() {
			req.Header.Set("Authorization", toks[i%len(toks)])
			i++
			c := pipeline.Acquire(&req, &resp)
			if env.j.Handle(c) != pipeline.Continue {
				panic(string(resp.Body()))
			}
			pipeline.Release(c)
		}
	})
}

// The miss benchmarks time what a token costs the first time it is seen:
// parsing, the signature check and the claims, without the cache.
func benchmarkJWTMiss(b *testing.B, key any, alg, kid string) {
	env := newJWTEnv(b, nil)
	tok := []byte(jwtSign(key, jwtHdr(alg, kid), jwtClaims(nil)))
	if _, r := env.j.verify(tok); r != jwtOK {
		b.Fatal(jwtErrors[r])
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, r := env.j.verify(tok); r != jwtOK {
			b.Fatal(jwtErrors[r])
		}
	}
}

func BenchmarkJWTMissHS256(b *testing.B) { benchmarkJWTMiss(b, jwtTestKeys(b).hs, "HS256", "hs") }
func BenchmarkJWTMissRS256(b *testing.B) { benchmarkJWTMiss(b, jwtTestKeys(b).rsa, "RS256", "rs") }
func BenchmarkJWTMissES256(b *testing.B) { benchmarkJWTMiss(b, jwtTestKeys(b).ec, "ES256", "es") }

// BenchmarkJWTForgedRS256 is what an attacker's bad-signature token costs
// (it is never cached).
func BenchmarkJWTForgedRS256(b *testing.B) {
	env := newJWTEnv(b, nil)
	tok := []byte(jwtSign(env.keys.rsa2, jwtHdr("RS256", "rs"), jwtClaims(nil)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := env.j.Verify(tok); err != ErrJWTSignature {
			b.Fatal(err)
		}
	}
}
