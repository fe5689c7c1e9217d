package sign_test

import (
	"fmt"
	"net/url"
	"time"

	"github.com/tollgate/tollgate/sign"
)

func ExampleSign() {
	// The query b=2&a=x+y signs as "ax yb2timestamp1700000000noncen1".
	sig, err := sign.Sign("s3cr3t", "b=2&a=x+y", "", "1700000000", "n1")
	if err != nil {
		panic(err)
	}
	fmt.Println(sig)
	// Output: 49f74e8383e4c0640da3d4cc8d40dbdae793c09891231c4dc8a1f47bc9dcf6a6
}

func ExampleStringToSign() {
	s, err := sign.StringToSign("z=26&a=q", "a=q&msg=hi+there", "1700000000", "n1")
	if err != nil {
		panic(err)
	}
	fmt.Println(s)
	// Output: aqmsghi therez26timestamp1700000000noncen1
}

func ExampleHeaders() {
	u, _ := url.Parse("https://api.example.com/v1/order/create?b=2&a=x+y")
	h, err := sign.Headers("app-1", "s3cr3t", "GET", u, "", time.Unix(1700000000, 0), "n1")
	if err != nil {
		panic(err)
	}
	for _, k := range []string{sign.HeaderAppKey, sign.HeaderTimestamp, sign.HeaderNonce, sign.HeaderSign} {
		fmt.Printf("%s: %s\n", k, h.Get(k))
	}
	// Output:
	// X-App-Key: app-1
	// X-Timestamp: 1700000000
	// X-Nonce: n1
	// X-Sign: 49f74e8383e4c0640da3d4cc8d40dbdae793c09891231c4dc8a1f47bc9dcf6a6
}

func ExampleVerifier() {
	v := sign.NewVerifier() // one per goroutine, or from a sync.Pool
	err := v.Verify([]byte("s3cr3t"), []byte("b=2&a=x+y"), nil,
		[]byte("1700000000"), []byte("n1"),
		[]byte("49f74e8383e4c0640da3d4cc8d40dbdae793c09891231c4dc8a1f47bc9dcf6a6"))
	fmt.Println(err)
	err = v.Verify([]byte("s3cr3t"), []byte("b=2&a=x+z"), nil,
		[]byte("1700000000"), []byte("n1"),
		[]byte("49f74e8383e4c0640da3d4cc8d40dbdae793c09891231c4dc8a1f47bc9dcf6a6"))
	fmt.Println(err)
	// Output:
	// <nil>
	// sign: signature mismatch
}
