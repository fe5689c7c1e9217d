//go:build !race

package auth

import (
	"testing"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

// TestSignatureAllocs gates the signed-request path: verifying a signature
// and claiming its nonce allocate nothing (standalone; the Redis claim of
// cluster mode allocates its command).
func TestSignatureAllocs(t *testing.T) {
	s, fc := newTestSignature(t, nil)
	st := newSignedStream(t, 600, fc.now().Unix())
	var resp fasthttp.Response
	run := func() {
		c := pipeline.Acquire(st.next(), &resp)
		if s.Handle(c) != pipeline.Continue {
			t.Fatalf("refused: %s", resp.Body())
		}
		pipeline.Release(c)
	}
	for range 50 {
		run()
	}
	if n := testing.AllocsPerRun(500, run); n != 0 {
		t.Fatalf("verifying a signed request allocates %.2f times, want 0", n)
	}
}
