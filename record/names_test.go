package record

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/valyala/fasthttp"
)

// Names clients and backends give their credentials, in the places they
// put them; and names that only look like them.
var (
	secretHeaders = []string{"Api-Key", "X-Vault-Token", "X-CSRF-Token", "X-Amz-Security-Token", "Private-Token",
		"Authorization", "Cookie", "X-Api-Key"}
	secretParams = []string{"api_key", "apikey", "key", "code", "sig", "X-Amz-Signature", "pwd", "jwt", "session",
		"password", "passwd", "secret", "token", "signature", "credential", "private_key", "otp", "pin",
		"accessToken", "newPassword", "clientSecret", "apiKey"}
	secretMembers = []string{"accessToken", "newPassword", "clientSecret", "apiKey", "private_key", "otp", "pin",
		"api_key", "Client-Secret", "refresh_token"}
	plainNames = []string{"keyword", "pinned", "design", "zipcode", "username"}
)

// valueOf is the value a test sends under name in place: each unique, so
// that one masked elsewhere cannot hide it.
func valueOf(place, name string) string {
	return "v-" + place + "-" + strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(name)) + "-7f3a9c"
}

// TestRecordMasksSecretsByMeaning sends, through a gateway that records,
// requests carrying every credential name above in every place a request
// and an answer carry them (header fields, query, form, JSON at any depth,
// multipart fields and JSON parts), and finds none of their values in the
// recording; the values of the look-alike names are all there.
func TestRecordMasksSecretsByMeaning(t *testing.T) {
	up := testutil.StartRecordingUpstream(t)
	answerJSON := `{"data":{"accessToken":"` + valueOf("ans", "accessToken") + `","refreshToken":"` + valueOf("ans", "refreshToken") +
		`","items":[{"id_token":"` + valueOf("ans", "idtoken") + `","keyword":"` + valueOf("ans", "keyword") + `"}]}}`
	up.SetAnswer(func(testutil.RawRequest) testutil.ScriptedAnswer {
		return testutil.ScriptedAnswer{Raw: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" +
			"X-Api-Token: " + valueOf("ans", "X-Api-Token") + "\r\nSet-Cookie: sid=" + valueOf("ans", "setcookie") + "; Path=/\r\n" +
			"X-Pinned: " + valueOf("ans", "xpinned") + "\r\n" +
			fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(answerJSON), answerJSON)}
	})
	dir := t.TempDir()
	g := startGateway(t, recordConfig, map[string]string{"UP": up.Addr, "DIR": dir, "Q": "64"})

	var secrets, plains []string
	keep := func(list *[]string, v string) string { *list = append(*list, v); return v }
	head := func(kind string) string {
		var b strings.Builder
		for _, h := range secretHeaders {
			fmt.Fprintf(&b, "%s: %s\r\n", h, keep(&secrets, valueOf(kind+"hdr", h)))
		}
		for _, p := range plainNames {
			fmt.Fprintf(&b, "X-%s: %s\r\n", p, keep(&plains, valueOf(kind+"hdr", p)))
		}
		return b.String()
	}
	query := func(kind string) string {
		q := url.Values{}
		for _, p := range secretParams {
			q.Set(p, keep(&secrets, valueOf(kind+"q", p)))
		}
		for _, p := range plainNames {
			q.Set(p, keep(&plains, valueOf(kind+"q", p)))
		}
		return q.Encode()
	}
	jsonDoc := func(place string) string {
		var inner []string
		for _, m := range secretMembers {
			inner = append(inner, fmt.Sprintf("%q:%q", m, keep(&secrets, valueOf(place, m))))
		}
		for _, p := range plainNames {
			inner = append(inner, fmt.Sprintf("%q:%q", p, keep(&plains, valueOf(place, p))))
		}
		return `{"user":{"profile":{` + strings.Join(inner, ",") + `}},"list":[{"apiKey":"` + keep(&secrets, valueOf(place+"list", "apiKey")) + `"}]}`
	}
	form := func() string {
		f := url.Values{}
		for _, p := range secretParams {
			f.Set(p, keep(&secrets, valueOf("form", p)))
		}
		for _, p := range plainNames {
			f.Set(p, keep(&plains, valueOf("form", p)))
		}
		return f.Encode()
	}
	multipart := func() string {
		var b strings.Builder
		for _, p := range secretParams {
			fmt.Fprintf(&b, "--XyZ\r\nContent-Disposition: form-data; name=%q\r\n\r\n%s\r\n", p, keep(&secrets, valueOf("mp", p)))
		}
		for _, p := range plainNames {
			fmt.Fprintf(&b, "--XyZ\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n%s\r\n", p, keep(&plains, valueOf("mp", p)))
		}
		fmt.Fprintf(&b, "--XyZ\r\nContent-Disposition: form-data; name=\"meta\"\r\nContent-Type: application/json\r\n\r\n%s\r\n", jsonDoc("mpjson"))
		fmt.Fprintf(&b, "--XyZ\r\nContent-Disposition: form-data; name=\"doc\"; filename=\"a.txt\"\r\nContent-Type: text/plain\r\nX-Auth-Token: %s\r\n\r\n%s\r\n--XyZ--\r\n",
			keep(&secrets, valueOf("mphdr", "xauthtoken")), keep(&plains, valueOf("mp", "file")))
		return b.String()
	}
	bodies := []struct{ kind, ct, body string }{
		{"json", "application/json", jsonDoc("json")},
		{"form", "application/x-www-form-urlencoded", form()},
		{"multipart", "multipart/form-data; boundary=XyZ", multipart()},
	}
	conn, err := net.Dial("tcp", g.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	for _, b := range bodies {
		raw := "POST /orders?" + query(b.kind) + " HTTP/1.1\r\nHost: api.test\r\n" + head(b.kind) +
			"Content-Type: " + b.ct + fmt.Sprintf("\r\nContent-Length: %d\r\n\r\n", len(b.body)) + b.body
		if _, err := io.WriteString(conn, raw); err != nil {
			t.Fatal(err)
		}
		status, err := br.ReadString('\n')
		if err != nil || !strings.Contains(status, " 200 ") {
			t.Fatalf("%s: %q %v", b.kind, status, err)
		}
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if line == "\r\n" {
				break
			}
		}
		if _, err := io.ReadFull(br, make([]byte, len(answerJSON))); err != nil {
			t.Fatal(err)
		}
	}
	secrets = append(secrets, valueOf("ans", "accessToken"), valueOf("ans", "refreshToken"), valueOf("ans", "idtoken"),
		valueOf("ans", "X-Api-Token"), valueOf("ans", "setcookie"))
	plains = append(plains, valueOf("ans", "keyword"), valueOf("ans", "xpinned"))

	var recording []byte
	deadline := time.Now().Add(5 * time.Second)
	for bytes.Count(recording, []byte("\n")) < len(bodies) {
		if time.Now().After(deadline) {
			t.Fatalf("%d records written:\n%s", bytes.Count(recording, []byte("\n")), recording)
		}
		time.Sleep(20 * time.Millisecond)
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		recording = nil
		for _, f := range files {
			b, _ := os.ReadFile(f)
			recording = append(recording, b...)
		}
	}
	for _, s := range secrets {
		if bytes.Contains(recording, []byte(s)) {
			t.Errorf("the recording holds %s", s)
		}
	}
	for _, p := range plains {
		if !bytes.Contains(recording, []byte(p)) {
			t.Errorf("the recording lost %s, which is no secret", p)
		}
	}
	for _, omitted := range []string{`_omitted"`} {
		if bytes.Contains(recording, []byte(omitted)) {
			t.Errorf("a body was left out rather than masked:\n%s", recording)
		}
	}
}

// TestRecordMasksFormAnswers: a token endpoint that answers urlencoded
// (access_token=…&scope=…, as some OAuth servers do) keeps its tokens out
// of the record like a JSON one.
func TestRecordMasksFormAnswers(t *testing.T) {
	r, w := testRecorder(t, Rule{})
	line := exchange(t, r, w, "POST /login/oauth/access_token HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", "", func(resp *fasthttp.Response) {
		resp.Header.SetContentType("application/x-www-form-urlencoded")
		resp.SetBodyString("access_token=gho_16C7e42F292c6912E7710c838347Ae178B4a&scope=repo&token_type=bearer")
	})
	e := readLine(t, line)
	if e.RespBody != "access_token=***&scope=repo&token_type=***" || bytes.Contains(line, []byte("gho_")) {
		t.Fatalf("answer kept as %q", e.RespBody)
	}
}
