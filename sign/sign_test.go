package sign

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
)

const (
	testTS    = "1700000000"
	testNonce = "n0nce"
	testTail  = "timestamp1700000000noncen0nce"
)

// vectors are derived by hand from the rules in the package documentation;
// want is the full signing string.
var vectors = []struct {
	name        string
	query, form string
	want        string
}{
	{"ascii sorted", "c=3&b=2&a=1", "", "a1b2c3" + testTail},
	{"ascii byte order", "b=1&B=2&_=3&0=4", "", "04B2_3b1" + testTail},
	{"prefix keys", "ab=1&a=2&abc=3&a+b=4", "", "a2a b4ab1abc3" + testTail},
	{"repeated key with the same value", "a=1&b=x&a=1&a=%31", "", "a1bx" + testTail},
	{"repeated empty value", "a=&b=x&a", "", "abx" + testTail},
	{"percent and plus", "s=a%2Bb%26c%3Dd%25&t=%e4%bd%a0%E5%A5%BD&u=hello+world&v=%2B+%20", "",
		"sa+b&c=d%t你好uhello worldv+  " + testTail},
	{"empty values and keys", "a=&b&=x&=&&c=1&", "", "abc1" + testTail},
	{"first = splits, ; is plain", "k=v=w;x&z=;", "", "kv=w;xz;" + testTail},
	{"same value in query and form", "a=q1&z=26&a=q1", "b=f&a=q1&z=26&c=", "aq1bfcz26" + testTail},
	{"form only", "", "msg=hi+there&to=%40bob", "msghi thereto@bob" + testTail},
	{"form repeated key", "", "x=1&x=1&w=0", "w0x1" + testTail},
	// UTF-16 order: z < é < U+10000 < U+1F600 (surrogate pairs D800…, D83D…)
	// < U+E000 < U+FF21. UTF-8 byte order would put U+E000 and U+FF21 before
	// both supplementary characters.
	{"utf16 order", "%EF%BC%A1=fw&%F0%9F%98%80=smile&%C3%A9=e&z=ascii&%EE%80%80=pua&%F0%90%80%80=lin", "",
		"zasciiée\U00010000lin😀smile\uE000puaＡfw" + testTail},
	{"utf16 order after common prefix", "k%EE%80%80=1&k%F0%9F%98%80=2&k~=3", "", "k~3k😀2k\uE0001" + testTail},
	{"raw utf8", "名=值&a=1", "", "a1名值" + testTail},
	{"encoded key equals raw key", "%61=1&a=1", "", "a1" + testTail},
	{"empty key with bad escape is skipped", "=%zz&a=1", "", "a1" + testTail},
	{"nothing", "", "", testTail},
}

func hmacHex(secret, msg string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

func TestSignVectors(t *testing.T) {
	secrets := []string{"s3cr3t", "", strings.Repeat("k", 64), strings.Repeat("long secret ", 20), "秘密"}
	v := new(Verifier)
	for _, tc := range vectors {
		t.Run(tc.name, func(t *testing.T) {
			got, err := StringToSign(tc.query, tc.form, testTS, testNonce)
			if err != nil || got != tc.want {
				t.Errorf("StringToSign = %q, %v; want %q", got, err, tc.want)
			}
			b, err := v.Append([]byte("prefix:"), []byte(tc.query), []byte(tc.form), []byte(testTS), []byte(testNonce))
			if err != nil || string(b) != "prefix:"+tc.want {
				t.Errorf("Verifier.Append = %q, %v; want %q", b, err, "prefix:"+tc.want)
			}
			for _, secret := range secrets {
				want := hmacHex(secret, tc.want)
				sig, err := Sign(secret, tc.query, tc.form, testTS, testNonce)
				if err != nil || sig != want {
					t.Errorf("Sign(%q) = %q, %v; want %q", secret, sig, err, want)
				}
				vs, err := v.AppendSignature(nil, []byte(secret), []byte(tc.query), []byte(tc.form), []byte(testTS), []byte(testNonce))
				if err != nil || string(vs) != want {
					t.Errorf("AppendSignature(%q) = %q, %v; want %q", secret, vs, err, want)
				}
				if err := v.Verify([]byte(secret), []byte(tc.query), []byte(tc.form), []byte(testTS), []byte(testNonce), []byte(want)); err != nil {
					t.Errorf("Verify(%q) = %v", secret, err)
				}
				if v.Check([]byte(secret+"x"), []byte(tc.query), []byte(tc.form), []byte(testTS), []byte(testNonce), []byte(want)) {
					t.Errorf("Check accepted the wrong secret")
				}
			}
		})
	}
}

// TestSignLiteral pins one signature to a literal computed outside Go.
func TestSignLiteral(t *testing.T) {
	// printf '%s' 'ax yb2timestamp1700000000noncen1' | openssl dgst -sha256 -hmac s3cr3t
	const want = "49f74e8383e4c0640da3d4cc8d40dbdae793c09891231c4dc8a1f47bc9dcf6a6"
	got, err := Sign("s3cr3t", "b=2&a=x+y&b=2", "", "1700000000", "n1")
	if err != nil || got != want {
		t.Fatalf("Sign = %q, %v; want %q", got, err, want)
	}
	if !new(Verifier).Check([]byte("s3cr3t"), []byte("b=2&a=x+y&b=2"), nil, []byte("1700000000"), []byte("n1"), []byte(want)) {
		t.Fatal("Check rejected the literal signature")
	}
}

// TestSignManyParams covers requests past the small-request sort: 40 keys
// given in reverse order, each twice, half of them again in the form (a
// repeat must carry the same value), then the same with one repeat that
// differs.
func TestSignManyParams(t *testing.T) {
	var q, f, want []string
	for i := 39; i >= 0; i-- {
		k := fmt.Sprintf("k%02d", i)
		q = append(q, k+"=q"+k, k+"=q"+k)
		if i%2 == 0 {
			f = append(f, k+"=q"+k)
		}
	}
	for i := range 40 {
		k := fmt.Sprintf("k%02d", i)
		want = append(want, k+"q"+k)
	}
	query, form := strings.Join(q, "&"), strings.Join(f, "&")
	wantS := strings.Join(want, "") + testTail
	if got, err := StringToSign(query, form, testTS, testNonce); err != nil || got != wantS {
		t.Errorf("StringToSign = %q, %v", got, err)
	}
	v := new(Verifier)
	if got, err := v.Append(nil, []byte(query), []byte(form), []byte(testTS), []byte(testNonce)); err != nil || string(got) != wantS {
		t.Errorf("Append = %q, %v", got, err)
	}
	form += "&k17=other"
	if _, err := StringToSign(query, form, testTS, testNonce); !errors.Is(err, ErrRepeated) || !strings.Contains(err.Error(), `"k17"`) {
		t.Errorf("StringToSign with a differing repeat: %v", err)
	}
	if _, err := v.Append(nil, []byte(query), []byte(form), []byte(testTS), []byte(testNonce)); err != ErrRepeated {
		t.Errorf("Append with a differing repeat: %v", err)
	}
	if key, cut := v.RepeatedKey(); string(key) != "k17" || cut {
		t.Errorf("RepeatedKey = %q, %v", key, cut)
	}
}

func TestSignErrors(t *testing.T) {
	many := strings.Repeat("a=1&", MaxParams)
	cases := []struct {
		name        string
		query, form string
		want        error
	}{
		{"bad hex", "a=%zz", "", ErrEncoding},
		{"trailing percent", "a=%", "", ErrEncoding},
		{"short escape", "a=%4", "", ErrEncoding},
		{"bad escape in key", "%g1=1", "", ErrEncoding},
		{"bad escape in form", "a=1", "x=%", ErrEncoding},
		{"bad escape in a later repeat", "a=1&a=%zz", "", ErrEncoding},
		{"invalid utf8 escape", "a=%FF", "", ErrUTF8},
		{"encoded surrogate", "%ED%A0%80=1", "", ErrUTF8},
		{"truncated sequence", "%C3=1", "", ErrUTF8},
		{"raw invalid byte", "a=\xff", "", ErrUTF8},
		{"too many params", many + "b=2", "", ErrTooManyParams},
		{"too many across form", many, "b=2", ErrTooManyParams},
		{"too large", "a=" + strings.Repeat("x", MaxInput), "", ErrTooLarge},
		{"repeated with another value", "amount=1&amount=1000", "", ErrRepeated},
		{"repeated after a same value", "a=1&a=1&a=2", "", ErrRepeated},
		{"empty and missing value differ from a value", "a&a=1", "", ErrRepeated},
		{"repeated in the form", "", "amount=1&amount=1000", ErrRepeated},
		{"query and form differ", "amount=1", "amount=1000", ErrRepeated},
		{"encoded key repeats raw key", "%61=1&a=2", "", ErrRepeated},
		{"values differ only in encoding", "a=%2B&a=+", "", ErrRepeated},
		{"bad escape wins over a repeat", "a=1&a=2&b=%zz", "", ErrEncoding},
	}
	v := new(Verifier)
	sig := []byte(strings.Repeat("0", SignatureLen))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := StringToSign(tc.query, tc.form, testTS, testNonce); !errors.Is(err, tc.want) {
				t.Errorf("StringToSign error = %v; want %v", err, tc.want)
			}
			if _, err := Sign("k", tc.query, tc.form, testTS, testNonce); !errors.Is(err, tc.want) {
				t.Errorf("Sign error = %v; want %v", err, tc.want)
			}
			b, err := v.Append([]byte("x"), []byte(tc.query), []byte(tc.form), []byte(testTS), []byte(testNonce))
			if err != tc.want || string(b) != "x" {
				t.Errorf("Append = %q, %v; want %q, %v", b, err, "x", tc.want)
			}
			if err := v.Verify([]byte("k"), []byte(tc.query), []byte(tc.form), []byte(testTS), []byte(testNonce), sig); err != tc.want {
				t.Errorf("Verify error = %v; want %v", err, tc.want)
			}
		})
	}
}

func TestSignLimitsInclusive(t *testing.T) {
	// MaxParams parameters, plus empty keys and segments that do not count.
	q := strings.Repeat("a=1&", MaxParams-1) + "b=2&=x&&"
	if _, err := StringToSign(q, "", testTS, testNonce); err != nil {
		t.Errorf("StringToSign at MaxParams: %v", err)
	}
	if _, err := new(Verifier).Append(nil, []byte(q), nil, []byte(testTS), []byte(testNonce)); err != nil {
		t.Errorf("Append at MaxParams: %v", err)
	}
	big := "a=" + strings.Repeat("x", MaxInput-2-len(testTS)-len(testNonce))
	want := "a" + big[2:] + testTail
	if got, err := StringToSign(big, "", testTS, testNonce); err != nil || got != want {
		t.Errorf("StringToSign at MaxInput: len %d, %v", len(got), err)
	}
	if got, err := new(Verifier).Append(nil, []byte(big), nil, []byte(testTS), []byte(testNonce)); err != nil || string(got) != want {
		t.Errorf("Append at MaxInput: len %d, %v", len(got), err)
	}
}

func TestVerifySignatureFormat(t *testing.T) {
	const secret, q = "s3cr3t", "a=1&b=2"
	good, _ := Sign(secret, q, "", testTS, testNonce)
	v := NewVerifier()
	cases := map[string]string{
		"empty":     "",
		"uppercase": strings.ToUpper(good),
		"short":     good[:63],
		"long":      good + "0",
		"non-hex":   "g" + good[1:],
		"flipped":   string(good[0]^1) + good[1:],
	}
	for name, sig := range cases {
		if err := v.Verify([]byte(secret), []byte(q), nil, []byte(testTS), []byte(testNonce), []byte(sig)); err != ErrSignature {
			t.Errorf("%s: Verify = %v; want ErrSignature", name, err)
		}
	}
	if err := v.Verify([]byte(secret), []byte(q), nil, []byte(testTS), []byte(testNonce), []byte(good)); err != nil {
		t.Errorf("good signature: %v", err)
	}
	// The timestamp and nonce are signed.
	if v.Check([]byte(secret), []byte(q), nil, []byte("1700000001"), []byte(testNonce), []byte(good)) {
		t.Error("Check accepted another timestamp")
	}
	if v.Check([]byte(secret), []byte(q), nil, []byte(testTS), []byte("other"), []byte(good)) {
		t.Error("Check accepted another nonce")
	}
}

// TestVerifierReuse runs requests of different shapes through one Verifier
// so that stale scratch state would show.
func TestVerifierReuse(t *testing.T) {
	v := new(Verifier)
	for range 3 {
		for _, tc := range vectors {
			b, err := v.Append(nil, []byte(tc.query), []byte(tc.form), []byte(testTS), []byte(testNonce))
			if err != nil || string(b) != tc.want {
				t.Fatalf("%s: Append = %q, %v", tc.name, b, err)
			}
			_, _ = v.Append(nil, []byte("a=%zz"), nil, nil, nil)
		}
	}
}

func TestIsForm(t *testing.T) {
	cases := []struct {
		method, ct string
		want       bool
	}{
		{"POST", "application/x-www-form-urlencoded", true},
		{"POST", "application/x-www-form-urlencoded; charset=UTF-8", true},
		{"POST", "Application/X-WWW-Form-Urlencoded;charset=utf-8", true},
		{"POST", " application/x-www-form-urlencoded\t; a=b", true},
		{"post", "application/x-www-form-urlencoded", false},
		{"PUT", "application/x-www-form-urlencoded", false},
		{"GET", "application/x-www-form-urlencoded", false},
		{"POST", "application/x-www-form-urlencodedx", false},
		{"POST", "multipart/form-data; boundary=x", false},
		{"POST", "application/json", false},
		{"POST", "", false},
	}
	for _, tc := range cases {
		if got := IsForm(tc.method, tc.ct); got != tc.want {
			t.Errorf("IsForm(%q, %q) = %v", tc.method, tc.ct, got)
		}
		if got := IsForm([]byte(tc.method), []byte(tc.ct)); got != tc.want {
			t.Errorf("IsForm([]byte %q, %q) = %v", tc.method, tc.ct, got)
		}
	}
}

func TestCompareKeys(t *testing.T) {
	// In ascending UTF-16 order.
	keys := []string{"", "A", "B", "_", "a", "a b", "ab", "abc", "é", "ÿ", "Ā", "\uD7FF", "\U00010000", "😀", "😀a", "\U0010FFFF", "\uE000", "\uFF21", "\uFFFF"}
	for i, a := range keys {
		for j, b := range keys {
			got := compareKeys([]byte(a), []byte(b))
			switch {
			case i < j && got >= 0, i > j && got <= 0, i == j && got != 0:
				t.Errorf("compareKeys(%q, %q) = %d", a, b, got)
			}
		}
	}
}
