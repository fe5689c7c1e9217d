package record

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/valyala/fasthttp"
)

func multipartRaw(ct, body string) string {
	return "POST /up HTTP/1.1\r\nHost: h\r\nContent-Type: " + ct + "\r\nContent-Length: " + itoa(len(body)) + "\r\n\r\n" + body
}

// TestRecordMultipart: parts are kept, each masked as its name and type
// say; what does not read as multipart is left out, never kept in part.
func TestRecordMultipart(t *testing.T) {
	r, w := testRecorder(t, Rule{MaxBody: 4096, Mask: []string{"form.card_no"}})
	ok := func(resp *fasthttp.Response) { resp.SetBodyString("done") }
	for name, tc := range map[string]struct {
		ct, body, want string
		omitted        bool
	}{
		"names": {"multipart/form-data; boundary=b",
			"pre\r\n--b\r\nContent-Disposition: form-data; name=\"newPassword\"\r\n\r\nhunter2-mp-0001\r\n" +
				"--b\r\nContent-Disposition: form-data; name=card_no\r\n\r\n4111111111111111\r\n" +
				"--b\r\ncontent-disposition: form-data; name*=utf-8''api_key\r\n\r\nkey-mp-000000001\r\n" +
				"--b\r\nContent-Disposition: form-data; name=\"pinned\"\r\n\r\nyes\r\n--b--\r\nepilogue",
			"pre\r\n--b\r\nContent-Disposition: form-data; name=\"newPassword\"\r\n\r\n***\r\n" +
				"--b\r\nContent-Disposition: form-data; name=card_no\r\n\r\n***\r\n" +
				"--b\r\ncontent-disposition: form-data; name*=utf-8''api_key\r\n\r\n***\r\n" +
				"--b\r\nContent-Disposition: form-data; name=\"pinned\"\r\n\r\nyes\r\n--b--\r\nepilogue", false},
		"quoted boundary, bare LF, typed parts": {`multipart/mixed; charset=utf-8; boundary="a b;c"`,
			"--a b;c\nContent-Type: application/json\n\n{\"x\":{\"accessToken\":\"tok-mp-00000001\"},\"n\":1}\n" +
				"--a b;c\nContent-Type: application/x-www-form-urlencoded\nX-Api-Key: hdr-mp-000000001\n\nsig=sig-mp-000000001&page=2\n--a b;c--\n",
			"--a b;c\nContent-Type: application/json\n\n{\"x\":{\"accessToken\":\"***\"},\"n\":1}\n" +
				"--a b;c\nContent-Type: application/x-www-form-urlencoded\nX-Api-Key:***\n\nsig=***&page=2\n--a b;c--\n", false},
		"boundary in content": {"multipart/form-data; boundary=b",
			"--b\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nx--b y\r\n--b--\r\n",
			"--b\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nx--b y\r\n--b--\r\n", false},
		"no boundary":      {"multipart/form-data", "--b\r\n\r\nsecret-mp-00000001\r\n--b--\r\n", "", true},
		"no delimiter":     {"multipart/form-data; boundary=zz", "password=secret-mp-00000001", "", true},
		"unclosed":         {"multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nsecret-mp-00000001", "", true},
		"bad json part":    {"multipart/form-data; boundary=b", "--b\r\nContent-Type: application/json\r\n\r\n{\"a\":,\"password\":\"secret-mp-00000001\"}\r\n--b--\r\n", "", true},
		"nested multipart": {"multipart/form-data; boundary=b", "--b\r\nContent-Type: multipart/mixed; boundary=c\r\n\r\n--c\r\n\r\nsecret-mp-00000001\r\n--c--\r\n--b--\r\n", "", true},
	} {
		t.Run(name, func(t *testing.T) {
			line := exchange(t, r, w, multipartRaw(tc.ct, tc.body), "", ok)
			e := readLine(t, line)
			for _, s := range []string{"hunter2-mp", "4111111111111111", "key-mp", "tok-mp", "hdr-mp", "sig-mp", "secret-mp"} {
				if strings.Contains(string(line), s) {
					t.Fatalf("the record holds %s:\n%s", s, line)
				}
			}
			if tc.omitted {
				if e.ReqBodyOmitted != "multipart" {
					t.Fatalf("kept %q, omitted %q", e.ReqBody, e.ReqBodyOmitted)
				}
				return
			}
			if e.ReqBody != tc.want || e.ReqBodyOmitted != "" {
				t.Fatalf("body %q (omitted %q)\nwant %q", e.ReqBody, e.ReqBodyOmitted, tc.want)
			}
		})
	}
}

// TestRecordMultipartCut: a body longer than max_body is kept as far as
// max_body, a field the cut falls in masked as far as it is kept, a part
// whose header the cut falls in left out.
func TestRecordMultipartCut(t *testing.T) {
	body := "--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nplain-value\r\n" +
		"--b\r\nContent-Disposition: form-data; name=\"password\"\r\n\r\nhunter2-cut-0123456789\r\n" +
		"--b\r\nContent-Disposition: form-data; name=\"token\"\r\n\r\ntok-cut-0123456789\r\n--b--\r\n"
	ok := func(resp *fasthttp.Response) { resp.SetBodyString("done") }
	for cut := 1; cut < len(body); cut++ {
		r, w := testRecorder(t, Rule{MaxBody: cut})
		line := exchange(t, r, w, multipartRaw("multipart/form-data; boundary=b", body), "", ok)
		e := readLine(t, line)
		for _, s := range []string{"hunter", "tok-cut", "-0123456789"} {
			if strings.Contains(string(line), s) {
				t.Fatalf("cut at %d: the record holds %s:\n%s", cut, s, line)
			}
		}
		if e.ReqBodyOmitted != "" || !e.ReqBodyCut || len(e.ReqBody) > cut {
			t.Fatalf("cut at %d: %q cut %v omitted %q", cut, e.ReqBody, e.ReqBodyCut, e.ReqBodyOmitted)
		}
	}
}

// TestRecordMultipartAllocs gates masking a multipart request on the
// request path: nothing allocated once the pool is warm.
func TestRecordMultipartAllocs(t *testing.T) {
	if testutil.Race {
		t.Skip("the race detector allocates")
	}
	body := "--b\r\nContent-Disposition: form-data; name=\"newPassword\"\r\n\r\nhunter2-mp-0001\r\n" +
		"--b\r\nContent-Disposition: form-data; name=\"meta\"\r\nContent-Type: application/json\r\n\r\n{\"apiKey\":\"k-0123456789\",\"n\":1}\r\n" +
		"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\n" + strings.Repeat("f", 900) + "\r\n--b--\r\n"
	req := readRequest(t, multipartRaw("multipart/form-data; boundary=b", body))
	resp := new(fasthttp.Response)
	resp.SetBodyString("done")
	r, _ := testRecorder(t, Rule{})
	r.w = &Writer{queue: make(chan *entry)}
	serveOnce(r, req, resp)
	if n := testing.AllocsPerRun(1000, func() { serveOnce(r, req, resp) }); n != 0 {
		t.Fatalf("%.2f allocations per request", n)
	}
}
