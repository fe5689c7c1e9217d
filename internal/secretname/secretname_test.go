package secretname

import (
	"strings"
	"testing"
)

// secretNames are credentials seen in the wild, spelt as clients and
// backends spell them.
var secretNames = []string{
	// header fields
	"Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "X-Sign", "X-Api-Key", "Api-Key",
	"X-Vault-Token", "X-CSRF-Token", "X-Amz-Security-Token", "Private-Token", "X-Api-Token",
	"X-Auth-Token", "X-Access-Token", "X_Sign", "proxy_authorization",
	// query and form parameters
	"api_key", "apikey", "key", "code", "sig", "sign", "X-Amz-Signature", "pwd", "jwt", "session",
	"password", "passwd", "secret", "token", "signature", "credential", "otp", "pin", "PIN", "Key",
	"client_secret", "access_token", "refresh_token", "id_token", "X-Amz-Credential", "sessionId",
	// JSON members
	"accessToken", "newPassword", "clientSecret", "apiKey", "private_key", "privateKey", "refreshToken",
	"user.password", "old password",
}

var plainNames = []string{
	"keyword", "pinned", "design", "monkey", "keys", "zipcode", "statusCode", "Content-Type", "Host",
	"User-Agent", "X-Request-Id", "X-App-Key", "amount", "email", "username", "pins", "signal",
	"codec", "otpx", "", "-", "card_no",
}

func TestDefaultMatchesByMeaning(t *testing.T) {
	for _, n := range secretNames {
		if !Default.MatchString(n) || !Default.Match([]byte(n)) {
			t.Errorf("%q is not taken for a secret's name", n)
		}
	}
	for _, n := range plainNames {
		if Default.MatchString(n) {
			t.Errorf("%q is taken for a secret's name", n)
		}
	}
}

// TestLongNames: a word is found wherever it sits in a name longer than
// the buffer, across the seam of two windows too; an exact name is never
// the whole of a long one.
func TestLongNames(t *testing.T) {
	for at := 100; at < 300; at++ {
		name := strings.Repeat("x", at) + "Pass_word" + strings.Repeat("y", 50)
		if !Default.MatchString(name) {
			t.Fatalf("password at %d not found", at)
		}
	}
	if Default.MatchString(strings.Repeat("k", 200)+"key") || Default.MatchString(strings.Repeat("-", 300)+"keyword") {
		t.Fatal("an exact name matched inside a long name")
	}
	if !Default.MatchString(strings.Repeat("-", 300) + "key") {
		t.Fatal("a name that normalizes to key is key")
	}
}

func TestWithExact(t *testing.T) {
	s := Default.WithExact("X-Card", "card_no")
	for _, n := range []string{"x_card", "X-CARD", "cardNo", "Card-No", "password"} {
		if !s.MatchString(n) {
			t.Errorf("%q not matched", n)
		}
	}
	if s.MatchString("card") || Default.MatchString("cardno") {
		t.Error("WithExact matched too much or changed Default")
	}
}

func TestMatchAllocs(t *testing.T) {
	name := []byte("X-Amz-Security-Token")
	long := []byte(strings.Repeat("z", 400) + "clientSecret")
	if n := testing.AllocsPerRun(100, func() { Default.Match(name); Default.Match(long); Default.MatchString("keyword") }); n != 0 {
		t.Fatalf("%.1f allocations per match", n)
	}
}

func BenchmarkMatch(b *testing.B) {
	names := [][]byte{[]byte("Content-Type"), []byte("X-Amz-Security-Token"), []byte("keyword"), []byte("accessToken")}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		Default.Match(names[i&3])
	}
}
