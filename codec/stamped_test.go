package codec

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// The fields package trace declares (it imports this package, so its
// init cannot run for these tests), and one more, as a new format would
// add.
func init() { StampedByGateway("traceparent", "X-Request-Id", "X-Test-Stamp", "traceparent") }

// TestStampedByGateway: a declared field is the gateway's word both ways
// — dropped from what a client sends upstream, from an answer read as it
// is, and from one fasthttp parsed — and declaring it twice changes
// nothing.
func TestStampedByGateway(t *testing.T) {
	if n := strings.Count(strings.Join(stamped, ","), "traceparent"); n != 1 {
		t.Fatalf("traceparent declared %d times", n)
	}
	for _, k := range []string{"X-Test-Stamp", "x-test-stamp", "X_Test_Stamp"} {
		if classify([]byte(k)) != classOwned || !IsGatewayOwned(k) {
			t.Errorf("%s: not the gateway's upstream", k)
		}
	}
	if kind, _ := answerField([]byte("X-TEST-STAMP")); kind != answerDropped {
		t.Errorf("X-TEST-STAMP: answer kind %d, want dropped", kind)
	}
	var r fasthttp.Response
	r.Header.Set("X-Test-Stamp", "theirs")
	r.Header.Set("X-Kept", "yes")
	StripResponseHopByHop(&r.Header)
	if len(r.Header.Peek("X-Test-Stamp")) != 0 || string(r.Header.Peek("X-Kept")) != "yes" {
		t.Fatalf("after the strip:\n%s", r.Header.Header())
	}
}
