package codec

import (
	"bufio"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

func TestCookie(t *testing.T) {
	var req fasthttp.Request
	raw := "GET / HTTP/1.1\r\nHost: a\r\nCookie: sid=s1; vip; theme=\"dark\"\r\nCookie: lang=zh;empty=\r\n\r\n"
	if err := req.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"sid": "s1", "theme": "dark", "lang": "zh"} {
		if got := Cookie(&req.Header, []byte(name)); string(got) != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	for _, name := range []string{"vip", "empty"} {
		if got := Cookie(&req.Header, []byte(name)); got == nil || len(got) != 0 {
			t.Errorf("%s = %v, want present and empty", name, got)
		}
	}
	if Cookie(&req.Header, []byte("SID")) != nil || Cookie(&req.Header, []byte("none")) != nil {
		t.Error("absent cookies found")
	}
	// Reading cookies this way leaves the forwarded header as it came.
	if got := string(req.Header.Peek("Cookie")); got != `sid=s1; vip; theme="dark"` {
		t.Errorf("Cookie field changed to %q", got)
	}
}
