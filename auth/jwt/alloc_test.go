//go:build !race

package jwt

import (
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/pipeline"
)

// TestJWTAllocs gates the hot path: a request carrying a cached token, the
// clock and revocation list consulted, allocates nothing, whether the
// token is accepted or refused (expired, revoked); so does a request with
// no token at all.
func TestJWTAllocs(t *testing.T) {
	env := newJWTEnv(t, nil)
	k := env.keys
	valid := jwtSign(k.rsa, jwtHdr("RS256", "rs"), jwtClaims(nil))
	expiring := jwtSign(k.ec, jwtHdr("ES256", "es"), jwtClaims(map[string]any{"jti": "exp-1", "exp": jwtT0.Add(time.Minute).Unix()}))
	revoked := jwtSign(k.hs, jwtHdr("HS256", "hs"), jwtClaims(map[string]any{"jti": "rev-1"}))
	longID := strings.Repeat("L", 2000)
	revokedLong := jwtSign(k.hs, jwtHdr("HS256", "hs"), jwtClaims(map[string]any{"jti": longID}))
	noExp := jwtSign(k.hs, jwtHdr("HS256", "hs"), jwtClaims(map[string]any{"exp": nil}))

	var req fasthttp.Request
	var resp fasthttp.Response
	req.Header.SetMethod("GET")
	req.SetRequestURI("/api/orders")
	req.Header.Set("User-Agent", "alloc-test")
	req.Header.Set("Accept", "application/json")
	run := func(authz string, want pipeline.Verdict) func() {
		return func() {
			if authz == "" {
				req.Header.Del("Authorization")
			} else {
				req.Header.Set("Authorization", authz)
			}
			c := pipeline.Acquire(&req, &resp)
			if v := env.j.Handle(c); v != want {
				t.Fatalf("Handle = %v, want %v: %s", v, want, resp.Body())
			}
			pipeline.Release(c)
		}
	}
	// Warm the cache (and fasthttp's buffers) at a time every token is good.
	for _, tok := range []string{valid, expiring, revoked, revokedLong} {
		run("Bearer "+tok, pipeline.Continue)()
	}
	run("Bearer "+noExp, pipeline.Stop)()
	env.rev.set("rev-1", "", true)
	env.rev.set(longID, "", true)
	env.clock.Add(2 * time.Minute)

	for _, tc := range []struct {
		name  string
		authz string
		want  pipeline.Verdict
	}{
		{"valid cached token", "Bearer " + valid, pipeline.Continue},
		{"expired cached token", "Bearer " + expiring, pipeline.Stop},
		{"revoked cached token", "Bearer " + revoked, pipeline.Stop},
		{"revoked cached token with a long jti", "Bearer " + revokedLong, pipeline.Stop},
		{"cached token without exp", "Bearer " + noExp, pipeline.Stop},
		{"no token", "", pipeline.Stop},
	} {
		f := run(tc.authz, tc.want)
		f()
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: Handle allocates %.1f times, want 0", tc.name, n)
		}
	}
	tok := []byte(valid)
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := env.j.Verify(tok); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Verify of a cached token allocates %.1f times, want 0", n)
	}
}
