//go:build !race

package sign

import "testing"

// Typical request: 8 parameters, some percent-encoded, some in a form body.
var (
	allocQuery  = []byte("method=order.create&v=2.0&format=json&sku=A%2F1024&city=%E5%8C%97%E4%BA%AC")
	allocForm   = []byte("amount=19.90&note=gift+wrap&currency=CNY")
	allocTS     = []byte("1700000000")
	allocNonce  = []byte("3f9a1c0e5b7d2468ace13579bdf02468")
	allocSecret = []byte("0123456789abcdef0123456789abcdef")
)

func TestVerifierCheckAllocs(t *testing.T) {
	v := new(Verifier)
	sig, err := v.AppendSignature(nil, allocSecret, allocQuery, allocForm, allocTS, allocNonce)
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
	}
	for name, fn := range tests {
		if n := testing.AllocsPerRun(100, fn); n != 0 {
			t.Errorf("%s: %v allocs per run; want 0", name, n)
		}
	}
}
