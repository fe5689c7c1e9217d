package sign

import (
	"strconv"
	"strings"
	"testing"
)

var (
	benchQuery  = []byte("method=order.create&v=2.0&format=json&sku=A%2F1024&city=%E5%8C%97%E4%BA%AC")
	benchForm   = []byte("amount=19.90&note=gift+wrap&currency=CNY")
	benchTS     = []byte("1700000000")
	benchNonce  = []byte("3f9a1c0e5b7d2468ace13579bdf02468")
	benchSecret = []byte("0123456789abcdef0123456789abcdef")
)

func BenchmarkVerifierCheck(b *testing.B) {
	v := NewVerifier()
	sig, _ := v.AppendSignature(nil, benchSecret, benchQuery, benchForm, benchTS, benchNonce)
	b.ReportAllocs()
	for b.Loop() {
		if !v.Check(benchSecret, benchQuery, benchForm, benchTS, benchNonce, sig) {
			b.Fatal("Check failed")
		}
	}
}

func BenchmarkVerifierCheckV2(b *testing.B) {
	v := NewVerifier()
	r := &Parts{Method: []byte("POST"), Path: []byte("/v1/order/create"), Query: benchQuery,
		ContentType: []byte(FormContentType), Body: benchForm, Timestamp: benchTS, Nonce: benchNonce}
	sig, _ := v.AppendSignatureV2(nil, benchSecret, r)
	b.ReportAllocs()
	for b.Loop() {
		if v.VerifyV2(benchSecret, r, sig) != nil {
			b.Fatal("VerifyV2 failed")
		}
	}
}

func BenchmarkVerifierAppend(b *testing.B) {
	v := NewVerifier()
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = v.Append(buf[:0], benchQuery, benchForm, benchTS, benchNonce)
	}
}

// BenchmarkVerifierCheckMaxParams is the worst case the limits allow in
// parameter count.
func BenchmarkVerifierCheckMaxParams(b *testing.B) {
	var sb strings.Builder
	for i := range MaxParams {
		if i > 0 {
			sb.WriteByte('&')
		}
		sb.WriteString("key" + strconv.Itoa((i*7919)%MaxParams) + "=value%20" + strconv.Itoa(i))
	}
	q := []byte(sb.String())
	v := NewVerifier()
	sig, _ := v.AppendSignature(nil, benchSecret, q, nil, benchTS, benchNonce)
	b.ReportAllocs()
	b.SetBytes(int64(len(q)))
	for b.Loop() {
		if !v.Check(benchSecret, q, nil, benchTS, benchNonce, sig) {
			b.Fatal("Check failed")
		}
	}
}

func BenchmarkSign(b *testing.B) {
	q, f, ts, n, s := string(benchQuery), string(benchForm), string(benchTS), string(benchNonce), string(benchSecret)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Sign(s, q, f, ts, n); err != nil {
			b.Fatal(err)
		}
	}
}
