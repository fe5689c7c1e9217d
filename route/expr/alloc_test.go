//go:build !race

package expr

import (
	"testing"

	"github.com/tollgate/tollgate/pipeline"
)

// TestEvalAllocs gates the hot path: evaluating a realistic expression
// against a form request and a JSON request allocates nothing.
func TestEvalAllocs(t *testing.T) {
	e := mustCompile(t, realistic)
	formReq := parseRequest(t, false, formHead, formBody)
	jsonReq := parseRequest(t, false, realisticJSONHead, jsonBody)
	for _, tc := range []struct {
		name string
		c    *pipeline.Ctx
	}{
		{"form", ctxFor(formReq, "10.0.0.1")},
		{"json", ctxFor(jsonReq, "2001:db8::7")},
	} {
		if !e.Eval(tc.c) {
			t.Fatalf("%s: the realistic expression is false", tc.name)
		}
		if n := testing.AllocsPerRun(1000, func() { e.Eval(tc.c) }); n != 0 {
			t.Errorf("%s: Eval allocates %.1f times, want 0", tc.name, n)
		}
	}
}
