//go:build !race

package sign

import "testing"

// Typical request: 8 parameters, some percent-encoded, some in a form body.
// The v2 requests sign the same with a method, path and body digest.
var (
	allocQuery  = []byte("method=order.create&v=2.0&format=json&sku=A%2F1024&city=%E5%8C%97%E4%BA%AC")
	allocForm   = []byte("amount=19.90&note=gift+wrap&currency=CNY")
	allocTS     = []byte("1700000000")
	allocNonce  = []byte("3f9a1c0e5b7d2468ace13579bdf02468")
	allocSecret = []byte("0123456789abcdef0123456789abcdef")

	allocV2 = &Parts{Method: []byte("POST"), Path: []byte("/v1/order/create"), Query: allocQuery,
		ContentType: []byte(FormContentType), Body: allocForm, Timestamp: allocTS, Nonce: allocNonce}
	allocV2Repeated = &Parts{Method: []byte("POST"), Path: []byte("/v1/order/create"), Query: allocQuery,
		ContentType: []byte(FormContentType), Body: []byte("amount=1&amount=1000"), Timestamp: allocTS, Nonce: allocNonce}
)

func TestVerifierCheckAllocs(t *testing.T) {
	v := new(Verifier)
	sig, err := v.AppendSignature(nil, allocSecret, allocQuery, allocForm, allocTS, allocNonce)
	if err != nil {
		t.Fatal(err)
	}
	sigV2, err := v.AppendSignatureV2(nil, allocSecret, allocV2)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 1024)
	tests := map[string]func(){
		"Check": func() {
			if !v.Check(allocSecret, allocQuery, allocForm, allocTS, allocNonce, sig) {
				t.Fatal("Check failed")
			}
		},
		"Check mismatch": func() {
			v.Check(allocSecret, allocQuery, allocForm, allocTS, allocNonce[1:], sig)
		},
		"Append": func() {
			buf, _ = v.Append(buf[:0], allocQuery, allocForm, allocTS, allocNonce)
		},
		"AppendSignature": func() {
			buf, _ = v.AppendSignature(buf[:0], allocSecret, allocQuery, allocForm, allocTS, allocNonce)
		},
		"IsForm": func() {
			IsForm([]byte("POST"), []byte("application/x-www-form-urlencoded; charset=utf-8"))
		},
		"CheckV2": func() {
			if v.VerifyV2(allocSecret, allocV2, sigV2) != nil {
				t.Fatal("VerifyV2 failed")
			}
		},
		"CheckV2 mismatch": func() {
			v.VerifyV2(allocSecret, allocV2, sig)
		},
		"CheckV2 repeated": func() {
			if v.VerifyV2(allocSecret, allocV2Repeated, sigV2) != ErrRepeated {
				t.Fatal("repeat not found")
			}
			v.RepeatedKey()
		},
		"AppendV2": func() {
			buf, _ = v.AppendV2(buf[:0], allocV2)
		},
	}
	for name, fn := range tests {
		if n := testing.AllocsPerRun(100, fn); n != 0 {
			t.Errorf("%s: %v allocs per run; want 0", name, n)
		}
	}
}
