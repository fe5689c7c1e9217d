package record

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/auth"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

// testRecorder builds rule for route "r" over a writer whose queue the
// test reads itself (no goroutine, no files).
func testRecorder(t testing.TB, rule Rule, consumers ...*auth.Consumer) (*Recorder, *Writer) {
	t.Helper()
	w := &Writer{queue: make(chan *entry, 64)}
	env := &pipeline.Env{Now: time.Now, State: pipeline.NewState(time.Minute).Begin()}
	WriterKey.Set(env, w)
	if len(consumers) > 0 {
		cs, err := auth.NewConsumers(consumers)
		if err != nil {
			t.Fatal(err)
		}
		auth.IdentityKey.Set(env, &auth.Identity{Consumers: cs})
	}
	b := &pipeline.Build{Env: env,
		Route: pipeline.RouteInfo{Name: "r", Forwards: true}}
	r, err := newRecorder(b, &rule)
	if err != nil {
		t.Fatal(err)
	}
	return r, w
}

// exchange runs raw through r with the answer respond writes, and returns
// the record's line (nil when nothing was recorded).
func exchange(t testing.TB, r *Recorder, w *Writer, raw, consumer string, respond func(*fasthttp.Response)) []byte {
	t.Helper()
	req := readRequest(t, raw)
	c := pipeline.AcquireParsed(req, new(fasthttp.Response))
	defer pipeline.Release(c)
	c.Start, c.RouteName, c.Consumer = time.Now(), "r", consumer
	r.Handle(c)
	respond(c.Resp)
	r.HandleResponse(c)
	select {
	case e := <-w.queue:
		line := e.appendLine(nil)
		e.release()
		return line
	default:
		return nil
	}
}

// readRequest parses raw as the gateway's transports do: a multipart form
// is not parsed ahead, so the body stays as the client sent it.
func readRequest(t testing.TB, raw string) *fasthttp.Request {
	t.Helper()
	req := new(fasthttp.Request)
	br := bufio.NewReader(strings.NewReader(raw))
	if err := req.Header.Read(br); err != nil {
		t.Fatal(err)
	}
	if err := req.ContinueReadBody(br, 0, false); err != nil {
		t.Fatal(err)
	}
	return req
}

func readLine(t testing.TB, line []byte) *Entry {
	t.Helper()
	var got *Entry
	err := Scan(bytes.NewReader(line), func(_ int, e *Entry, err error) error {
		got = e
		return err
	})
	if err != nil || got == nil {
		t.Fatalf("reading %s: %v", line, err)
	}
	return got
}

func TestRecordMasksSecrets(t *testing.T) {
	const appSecret = "app-secret-xyz-123"
	r, w := testRecorder(t, Rule{Mask: []string{"header.X-Card", "query.card_no", "json.card.number"}},
		&auth.Consumer{AppKey: "demo-app", Secret: []byte(appSecret), Enabled: true})
	secrets := []string{"4111111111111111", "tok-query-secret", "eyJhbGciOi.payload.sig-abcdef", "sess-0123456789",
		strings.Repeat("ab12", 16), "5500000000000004", "4000056655665556", "hunter2-long-pass", appSecret,
		"resp-cookie-secret-1"}
	body := `{"card":{"number":"4000056655665556","holder":"A"},"password":"hunter2-long-pass","note":"mine is ` + appSecret + `","amount":10}`
	raw := "POST /api/pay?card_no=4111111111111111&page=2&token=tok-query-secret HTTP/1.1\r\nHost: api.example.com\r\n" +
		"Authorization: Bearer eyJhbGciOi.payload.sig-abcdef\r\nCookie: session=sess-0123456789; theme=dark\r\n" +
		"X-Sign: " + strings.Repeat("ab12", 16) + "\r\nX-App-Key: demo-app\r\nX-Card: 5500000000000004\r\n" +
		"Content-Type: application/json\r\nContent-Length: " + itoa(len(body)) + "\r\n\r\n" + body
	line := exchange(t, r, w, raw, "demo-app", func(resp *fasthttp.Response) {
		resp.Header.SetContentType("application/json")
		resp.Header.Set("Set-Cookie", "sid=resp-cookie-secret-1; HttpOnly")
		resp.SetBodyString(`{"ok":true,"echo":"eyJhbGciOi.payload.sig-abcdef","card":{"number":"4000056655665556"}}`)
	})
	for _, s := range secrets {
		if bytes.Contains(line, []byte(s)) {
			t.Errorf("the record holds %q:\n%s", s, line)
		}
	}
	e := readLine(t, line)
	if e.Target != "/api/pay?card_no=***&page=2&token=***" || e.Host != "api.example.com" || e.Method != "POST" ||
		e.Route != "r" || e.Consumer != "demo-app" || e.Status != 200 {
		t.Errorf("request: %+v", e)
	}
	for name, want := range map[string]string{"Authorization": "Bearer ***", "Cookie": Masked, "X-Sign": Masked,
		"X-Card": Masked, "X-App-Key": "demo-app", "Content-Type": "application/json"} {
		if got := e.RequestHeader(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if want := `{"card":{"number":"***","holder":"A"},"password":"***","note":"mine is ***","amount":10}`; e.ReqBody != want {
		t.Errorf("request body %s\nwant %s", e.ReqBody, want)
	}
	if want := `{"ok":true,"echo":"***","card":{"number":"***"}}`; e.RespBody != want {
		t.Errorf("answer body %s\nwant %s", e.RespBody, want)
	}
	if got := e.ResponseHeader("Set-Cookie"); got != Masked {
		t.Errorf("Set-Cookie %q", got)
	}
}

// TestRecordMasksWhatBackendsRead: header names spelt with '_' (which
// CGI-style backends read as '-'), a multipart form, and JSON sent under
// another Content-Type keep their secrets out of the record too.
func TestRecordMasksWhatBackendsRead(t *testing.T) {
	r, w := testRecorder(t, Rule{Mask: []string{"header.X-Card"}})
	ok := func(resp *fasthttp.Response) { resp.SetBodyString("done") }
	for name, tc := range map[string]struct{ head, body, secret string }{
		"underscore names": {"X_Sign: sign-secret-0123456789\r\nProxy_Authorization: Basic cHJveHktc2VjcmV0\r\nx_card: 5500000000000004\r\n", "", "5500000000000004"},
		"multipart": {"Content-Type: multipart/form-data; boundary=b\r\n",
			"--b\r\nContent-Disposition: form-data; name=\"password\"\r\n\r\nhunter2-multipart\r\n--b--\r\n", "hunter2-multipart"},
		"json as text":      {"Content-Type: text/plain\r\n", `{"password":"hunter2-plain-json","n":1}`, "hunter2-plain-json"},
		"json without type": {"", ` [{"token":"tok-untyped-123456"}]`, "tok-untyped-123456"},
	} {
		t.Run(name, func(t *testing.T) {
			raw := "POST /t HTTP/1.1\r\nHost: h\r\n" + tc.head + "Content-Length: " + itoa(len(tc.body)) + "\r\n\r\n" + tc.body
			line := exchange(t, r, w, raw, "", ok)
			for _, s := range []string{tc.secret, "sign-secret-0123456789", "cHJveHktc2VjcmV0"} {
				if bytes.Contains(line, []byte(s)) {
					t.Fatalf("the record holds %q:\n%s", s, line)
				}
			}
		})
	}
}

func TestRecordFormAndBodies(t *testing.T) {
	r, w := testRecorder(t, Rule{MaxBody: 64, Mask: []string{"form.card_no"}})
	ok := func(body string) func(*fasthttp.Response) {
		return func(resp *fasthttp.Response) { resp.SetBodyString(body) }
	}
	form := "amount=10&card_no=4111111111111111&Pass%77ord=p%40ssw0rd-x&m=1"
	raw := "POST /pay HTTP/1.1\r\nHost: h\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: " +
		itoa(len(form)) + "\r\n\r\n" + form
	e := readLine(t, exchange(t, r, w, raw, "", ok("done")))
	if e.ReqBody != "amount=10&card_no=***&Pass%77ord=***&m=1" || e.RespBody != "done" || !e.RequestWhole() {
		t.Errorf("form: %q %q", e.ReqBody, e.RespBody)
	}

	long := strings.Repeat("x", 100)
	raw = "POST /t HTTP/1.1\r\nHost: h\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n" + long
	e = readLine(t, exchange(t, r, w, raw, "", ok(long)))
	if len(e.ReqBody) != 64 || !e.ReqBodyCut || len(e.RespBody) != 64 || !e.RespBodyCut || e.RequestWhole() {
		t.Errorf("cut: %d %v, %d %v", len(e.ReqBody), e.ReqBodyCut, len(e.RespBody), e.RespBodyCut)
	}

	// A long JSON body is masked as far as it is kept: a value the cut
	// falls in is masked too.
	long = `{"pad":"` + strings.Repeat("p", 40) + `","password":"hunter2-long-pass","more":"` + strings.Repeat("m", 40) + `"}`
	raw = "POST /j HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: " + itoa(len(long)) + "\r\n\r\n" + long
	line := exchange(t, r, w, raw, "", ok("{}"))
	if e = readLine(t, line); !e.ReqBodyCut || !strings.Contains(e.ReqBody, `"password":"*`) || bytes.Contains(line, []byte("hunte")) {
		t.Errorf("long JSON: %q", e.ReqBody)
	}

	// A JSON body the masks cannot read whole is not kept: a masked value
	// could sit past the error.
	bad := `{"x":,"password":"hunter2-long-pass"}`
	raw = "POST /j HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: " + itoa(len(bad)) + "\r\n\r\n" + bad
	line = exchange(t, r, w, raw, "", ok("{}"))
	if e = readLine(t, line); e.ReqBodyOmitted != "unreadable json" || bytes.Contains(line, []byte("hunter2")) {
		t.Errorf("invalid JSON kept: %s", line)
	}

	// An answer compressed by the backend is kept decoded, masks applied.
	r2, w2 := testRecorder(t, Rule{})
	zipped := fasthttp.AppendGzipBytes(nil, []byte(`{"access_token":"tok-0123456789","n":1}`))
	line = exchange(t, r2, w2, "GET /z HTTP/1.1\r\nHost: h\r\n\r\n", "", func(resp *fasthttp.Response) {
		resp.Header.SetContentType("application/json")
		resp.Header.SetContentEncoding("gzip")
		resp.SetBody(zipped)
	})
	if e = readLine(t, line); e.RespBody != `{"access_token":"***","n":1}` || !e.RespBodyDecoded {
		t.Errorf("gzip answer: %s", line)
	}

	// Binary bodies travel as base64.
	bin := "\xff\x00\x01"
	raw = "POST /b HTTP/1.1\r\nHost: h\r\nContent-Type: application/octet-stream\r\nContent-Length: 3\r\n\r\n" + bin
	if e = readLine(t, exchange(t, r2, w2, raw, "", ok("k"))); string(e.RequestBody()) != bin || e.ReqBody != "" {
		t.Errorf("binary body: %q %q", e.RequestBody(), e.ReqBody)
	}
}

func TestRecordSwitchAndSample(t *testing.T) {
	off := false
	r, w := testRecorder(t, Rule{On: &off})
	ok := func(resp *fasthttp.Response) { resp.SetBodyString("ok") }
	if exchange(t, r, w, "GET / HTTP/1.1\r\nHost: h\r\n\r\n", "", ok) != nil {
		t.Fatal("recorded while switched off")
	}
	if was := r.Switch(true); was {
		t.Fatal("the switch was on")
	}
	if exchange(t, r, w, "GET / HTTP/1.1\r\nHost: h\r\n\r\n", "", ok) == nil {
		t.Fatal("not recorded once switched on")
	}

	r, w = testRecorder(t, Rule{Sample: 0.2})
	n := 0
	for range 2000 {
		if exchange(t, r, w, "GET / HTTP/1.1\r\nHost: h\r\n\r\n", "", ok) != nil {
			n++
		}
	}
	if n < 300 || n > 500 {
		t.Fatalf("sample 0.2 recorded %d of 2000", n)
	}
}

func TestRecordRuleErrors(t *testing.T) {
	b := &pipeline.Build{Env: &pipeline.Env{Now: time.Now, State: pipeline.NewState(time.Minute).Begin()},
		Route: pipeline.RouteInfo{Name: "r"}}
	if _, err := newRecorder(b, &Rule{}); err == nil || !strings.Contains(err.Error(), "recording section") {
		t.Fatalf("without a writer: %v", err)
	}
	WriterKey.Set(b.Env, &Writer{})
	for rule, want := range map[*Rule]string{
		{Sample: 1.5}:                   "record.sample 1.5",
		{MaxBody: -1}:                   "record.max_body -1",
		{Mask: []string{"ip"}}:          "ip cannot be masked",
		{Mask: []string{"headers.x"}}:   "source",
		{Mask: []string{"json.a..b"}}:   "empty path segment",
		{Mask: []string{"query.a", ""}}: "source",
	} {
		if _, err := newRecorder(b, rule); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want %q", rule, err, want)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
