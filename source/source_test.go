package source

import (
	"bufio"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/testutil"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

func request(t testing.TB, raw string) *pipeline.Ctx {
	t.Helper()
	// As the transports read: a multipart body stays raw bytes.
	req := new(fasthttp.Request)
	br := bufio.NewReader(strings.NewReader(raw))
	if err := req.Header.Read(br); err != nil {
		t.Fatal(err)
	}
	if err := req.ContinueReadBody(br, 0, false); err != nil {
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
	unread := r.EachValue(func(k Kind, name, value []byte) bool {
		got = append(got, k.String()+":"+string(name)+"="+string(value))
		return true
	})
	want := []string{"path:=a/b", "path:=c", "query:=q", "query:q=x y", "query:=id", "query:id=1",
		"json:=a", "json:=b", "json:a.b=vé", "json:=n", "json:=items", "json:=name", "json:items.name=x", "json:items=y", "json:=e"}
	if strings.Join(got, "|") != strings.Join(want, "|") || unread != ReadAll {
		t.Fatalf("got %q (%d)\nwant %q", got, unread, want)
	}
	n := testing.AllocsPerRun(50, func() {
		r := NewReader(c)
		r.EachValue(func(Kind, []byte, []byte) bool { return true })
	})
	if n != 0 {
		t.Fatalf("EachValue allocates %v times", n)
	}
}

// TestEachValueUnread: a body the walk cannot read whole says why, so
// that a check that must see every value can refuse it.
func TestEachValueUnread(t *testing.T) {
	post := func(ct, body string) string {
		return "POST /x HTTP/1.1\r\nHost: h\r\nContent-Type: " + ct + "\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	deep := strings.Repeat("[", 1100) + `"x"` + strings.Repeat("]", 1100)
	for _, tc := range []struct {
		raw  string
		want Unread
	}{
		{post("application/json", `{"a":"b"}`), ReadAll},
		{post("application/json", `{"a":NaN}`), BadJSON},
		{post("application/json", "\xef\xbb\xbf{\"a\":\"b\"}"), BadJSON},
		{post("application/json", "{\x00\"\x00a\x00\"\x00:\x00\"\x00b\x00\"\x00}\x00"), BadJSON},
		{post("application/json", `{"a":"b",}`), BadJSON},
		{post("application/json", `{'a':'b'}`), BadJSON},
		{post("application/json", `{"a":"b"} {"c":"d"}`), BadJSON},
		{post("application/json", deep), TooDeep},
		{post("application/json; charset=utf-16", `{"a":"b"}`), Encoded},
		{post("application/json; charset=UTF-8", `{"a":"b"}`), ReadAll},
		{post("text/plain", `hello`), OtherMedia},
		{"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello", OtherMedia},
		{"POST /x HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: 5\r\n\r\nhello", Encoded},
		{post("multipart/form-data; boundary=XX", "--XX\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--XX--\r\n"), ReadAll},
		{post("multipart/form-data; boundary=XX", "--XX\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n"), BadMultipart},
		{post("multipart/form-data", "--XX\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--XX--\r\n"), BadMultipart},
		{post("multipart/form-data; boundary=XX", "--XX\r\nContent-Disposition: form-data; name=\"a\"; name=\"b\"\r\n\r\nv\r\n--XX--\r\n"), BadMultipart},
		{post("multipart/form-data; boundary=XX", "--XX\r\nContent-Disposition: form-data; name=\"a\"\r\nContent-Transfer-Encoding: base64\r\n\r\nJw==\r\n--XX--\r\n"), Encoded},
	} {
		c := request(t, tc.raw)
		r := NewReader(c)
		if got := r.EachValue(func(Kind, []byte, []byte) bool { return true }); got != tc.want {
			t.Errorf("%.80q: unread %d, want %d", tc.raw, got, tc.want)
		}
		pipeline.Release(c)
	}
}

// TestEachValueMultipart: field names, file names and field contents are
// visited; file contents are not.
func TestEachValueMultipart(t *testing.T) {
	body := "preamble\r\n--b1\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhello\r\nworld\r\n" +
		"--b1\r\nContent-Disposition: form-data; name=\"up\"; filename=\"a.txt\"\r\nContent-Type: application/octet-stream\r\n\r\nBINARY\r\n--b1--\r\nepilogue"
	c := request(t, "POST /x HTTP/1.1\r\nHost: h\r\nContent-Type: multipart/form-data; boundary=\"b1\"\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
	defer pipeline.Release(c)
	var got []string
	r := NewReader(c)
	unread := r.EachValue(func(k Kind, name, value []byte) bool {
		got = append(got, k.String()+":"+string(name)+"="+string(value))
		return true
	})
	want := []string{"path:=x", "form:=note", "form:note=hello\r\nworld", "form:=up", "form:up=a.txt"}
	if strings.Join(got, "|") != strings.Join(want, "|") || unread != ReadAll {
		t.Fatalf("got %q (%d)\nwant %q", got, unread, want)
	}
	if n := testing.AllocsPerRun(50, func() {
		r := NewReader(c)
		r.EachValue(func(Kind, []byte, []byte) bool { return true })
	}); n != 0 {
		t.Fatalf("EachValue on multipart allocates %v times", n)
	}
}
