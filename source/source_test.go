package source

import (
	"bufio"
	"net/netip"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/testutil"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

func request(t testing.TB, raw string) *pipeline.Ctx {
	t.Helper()
	req := new(fasthttp.Request)
	if err := req.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	c := pipeline.AcquireParsed(req, new(fasthttp.Response))
	c.ClientIP = netip.MustParseAddr("203.0.113.7")
	c.Consumer, c.UserID = "app-1", "u-9"
	return c
}

const sample = "POST /a/%7Eb?page=2&q=a+b&page=3 HTTP/1.1\r\nHost: h\r\nX-User-Id: 42\r\nx-user-id: 43\r\n" +
	"Cookie: sid=\"s 1\"; vip=\r\nContent-Type: application/json\r\nContent-Length: 38\r\n\r\n" +
	`{"order":{"items":[{"id":7}],"m":"x"}}`

func TestValue(t *testing.T) {
	c := request(t, sample)
	defer pipeline.Release(c)
	for text, want := range map[string]string{
		"query.page": "2", "query.q": "a b", "header.x-USER-id": "42", "cookie.sid": "s 1", "cookie.vip": "",
		"json.order.items.0.id": "7", "json.order.m": "x", "ip": "203.0.113.7", "path": "/a/~b", "method": "POST",
		"consumer": "app-1", "user": "u-9",
	} {
		s, err := Parse(text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		r := NewReader(c)
		v, found := r.Value(&s)
		if found != Scalar || string(v) != want {
			t.Errorf("%s = %q (%v), want %q", text, v, found, want)
		}
	}
	for _, text := range []string{"query.none", "header.None", "cookie.none", "form.a", "json.order.none"} {
		s, _ := Parse(text)
		r := NewReader(c)
		if _, found := r.Value(&s); found != Absent {
			t.Errorf("%s found", text)
		}
	}
	for _, bad := range []string{"", "query", "query.", "ip.x", "nope.x", "header.a b", "json.a..b", "path.x"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestValueAllocs(t *testing.T) {
	if testutil.Race {
		t.Skip("the race detector allocates; make test runs allocation gates without it")
	}
	c := request(t, sample)
	defer pipeline.Release(c)
	var srcs []Source
	for _, text := range []string{"query.page", "header.X-User-Id", "cookie.sid", "json.order.items.0.id", "ip", "path", "consumer"} {
		s, _ := Parse(text)
		srcs = append(srcs, s)
	}
	n := testing.AllocsPerRun(100, func() {
		r := NewReader(c)
		for i := range srcs {
			r.Value(&srcs[i])
		}
	})
	if n != 0 {
		t.Fatalf("lookups allocate %v times", n)
	}
}

func TestEachValue(t *testing.T) {
	c := request(t, "POST /a%2Fb/c?q=x+y&id=1 HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: 61\r\n\r\n"+
		`{"a":{"b":"v\u00e9","n":1},"items":[{"name":"x"},"y"],"e":[]}`)
	defer pipeline.Release(c)
	var got []string
	r := NewReader(c)
	r.EachValue(func(k Kind, name, value []byte) bool {
		got = append(got, k.String()+":"+string(name)+"="+string(value))
		return true
	})
	want := []string{"path:=a/b", "path:=c", "query:q=x y", "query:id=1", "json:a.b=vé", "json:items.name=x", "json:items=y"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	n := testing.AllocsPerRun(50, func() {
		r := NewReader(c)
		r.EachValue(func(Kind, []byte, []byte) bool { return true })
	})
	if n != 0 {
		t.Fatalf("EachValue allocates %v times", n)
	}
}
