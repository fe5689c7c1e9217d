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
		c := pipeline.AcquireParsed(st.next(), &resp)
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

	// Scheme v2: a JSON POST, its body digest included.
	v2 := newSignedStreamV2(t, 600, fc.now().Unix())
	runV2 := func() {
		c := pipeline.AcquireParsed(v2.next(), &resp)
		if s.Handle(c) != pipeline.Continue {
			t.Fatalf("v2 refused: %s", resp.Body())
		}
		pipeline.Release(c)
	}
	for range 50 {
		runV2()
	}
	if n := testing.AllocsPerRun(500, runV2); n != 0 {
		t.Fatalf("verifying a v2 signed request allocates %.2f times, want 0", n)
	}

	// The 400 for a parameter repeated with another value.
	var rep fasthttp.Request
	signedReq(t, &rep, "demo-app", "amount=1", "", fc.now().Unix(), "rep")
	rep.SetRequestURI("/api/x?amount=1&amount=1000&%22k%0A=1&%22k%0A=2")
	refuse := func() {
		c := pipeline.AcquireParsed(&rep, &resp)
		if s.Handle(c) != pipeline.Stop || resp.StatusCode() != 400 {
			t.Fatalf("not refused: %s", resp.Body())
		}
		pipeline.Release(c)
	}
	for range 50 {
		refuse()
	}
	if n := testing.AllocsPerRun(500, refuse); n != 0 {
		t.Fatalf("refusing a repeated parameter allocates %.2f times, want 0", n)
	}
}
