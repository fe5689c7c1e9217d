package expr

import (
	"bufio"
	"errors"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/source"
)

// parseRequest builds a request the way the gateway gets one: parsed from
// the wire, field names kept as the client wrote them (the netpoll
// transport disables normalization) unless normalize is set.
func parseRequest(tb testing.TB, normalize bool, head, body string) *fasthttp.Request {
	tb.Helper()
	lines := strings.Split(strings.TrimSpace(head), "\n")
	if body != "" {
		lines = append(lines, "Content-Length: "+strconv.Itoa(len(body)))
	}
	raw := strings.Join(lines, "\r\n") + "\r\n\r\n" + body
	req := new(fasthttp.Request)
	if !normalize {
		req.Header.DisableNormalizing()
	}
	if err := req.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		tb.Fatalf("parsing test request: %v\n%s", err, raw)
	}
	return req
}

func ctxFor(req *fasthttp.Request, ip string) *pipeline.Ctx {
	c := pipeline.AcquireParsed(req, new(fasthttp.Response))
	if ip != "" {
		c.ClientIP = netip.MustParseAddr(ip)
	}
	return c
}

func mustCompile(tb testing.TB, src string) *Expr {
	tb.Helper()
	e, err := Compile(src)
	if err != nil {
		tb.Fatalf("Compile(%q): %v", src, err)
	}
	if e.String() != src {
		tb.Fatalf("String() = %q, want %q", e.String(), src)
	}
	return e
}

const formHead = `POST /orders?cmd_id=1&cmd_id=2&page=2&q=a+b%20c&empty=&flag&pct=100%25&enc%5Bk%5D=v&dot.key=d HTTP/1.1
Host: api.example.com
x-channel: app
X-Trace: abc
X-Trace: second
X-Empty:
User-Agent: Mozilla/5.0 (X11)
Cookie: sid=s1; vip=; theme="dark"
Cookie: lang=zh
content-type: application/x-www-form-urlencoded; charset=utf-8`

const formBody = `amount=100&name=J%C3%BCrgen+M&dup=1&dup=2&empty=&flag&bad=%zz&a%62c=x&plus=1%2B1&&tail=x%4`

const jsonHead = `POST /pay HTTP/1.1
Host: api.example.com
Content-Type: application/vnd.api+json; charset=utf-8`

const jsonBody = `{
  "user": {"id": 42, "name": "A\"B\\C\/D \u00e9\ud83d\ude00", "tags": ["x", "y"], "vip": true, "note": null, "neg": -1.5e3},
  "items": [{"id": "i1"}, {"id": "i2", "qty": 3}],
  "amount": 100,
  "dup": 1, "dup": 2,
  "obj": {}, "arr": [],
  "0": "zero", "a.b": "dotted", "esc\"key": "k", "k\u0065y": "escaped key",
  "lone": "\ud800x", "empty": ""
}`

func TestEval(t *testing.T) {
	formReq := parseRequest(t, false, formHead, formBody)
	normReq := parseRequest(t, true, formHead, formBody)
	jsonReq := parseRequest(t, false, jsonHead, jsonBody)
	plainJSON := parseRequest(t, false, "POST /x HTTP/1.1\nHost: h\nContent-Type: Application/JSON", `{"a":{"b":"c"}}`)
	textJSON := parseRequest(t, false, "POST /x HTTP/1.1\nHost: h\nContent-Type: text/plain", `{"a":{"b":"c"}}`)
	badJSON := parseRequest(t, false, "POST /x HTTP/1.1\nHost: h\nContent-Type: application/json", `{"a":"b",}`)
	gzJSON := parseRequest(t, false, "POST /x HTTP/1.1\nHost: h\nContent-Type: application/json\nContent-Encoding: gzip", `{"a":"b"}`)
	idJSON := parseRequest(t, false, "POST /x HTTP/1.1\nHost: h\nContent-Type: application/json\ncontent-encoding: Identity", `{"a":"b"}`)
	arrJSON := parseRequest(t, false, "POST /x HTTP/1.1\nHost: h\nContent-Type: application/json", ` [ {"id": 1}, [true, false] ] `)
	get := parseRequest(t, false, "GET / HTTP/1.1\nHost: h", "")

	type check struct {
		expr string
		want bool
	}
	cases := []struct {
		name   string
		req    *fasthttp.Request
		ip     string
		checks []check
	}{
		{"query", formReq, "", []check{
			{`query.cmd_id == "1"`, true},        // first of repeated keys
			{`query.cmd_id == "2"`, false},       //
			{`query.cmd_id != "2"`, true},        //
			{`query.cmd_id in ["2", "1"]`, true}, //
			{`query.page == 2`, true},            // unquoted number
			{`query.page == "2"`, true},          //
			{`query.q == "a b c"`, true},         // + and %20 decode to spaces
			{`query.empty`, true},                // present, empty
			{`query.empty == ""`, true},          //
			{`query.flag`, true},                 // present without =
			{`query.flag == ""`, true},           //
			{`query.missing`, false},             //
			{`query.missing == ""`, false},       // absent is not empty
			{`query.missing != "x"`, true},       // != is !(==)
			{`query.pct == "100%"`, true},        //
			{`query."enc[k]" == "v"`, true},      // quoted name, decoded key
			{`query.dot.key == "d"`, true},       // dots belong to the name
			{`query.cmd_id ~= "^[12]$"`, true},   //
			{`query.cmd_id ~= "^\d{2}$"`, false}, // regex text is verbatim
			{`query.q ~= "b\sc"`, true},          //
			{`query.CMD_ID`, false},              // query keys are case-sensitive
		}},
		{"header", formReq, "", []check{
			{`header.X-Channel == "app"`, true}, // sent as x-channel
			{`header.x-channel == "app"`, true},
			{`header.X-CHANNEL in ["web", "app"]`, true},
			{`header.X-Trace == "abc"`, true}, // first of repeated fields
			{`header.X-Empty`, true},
			{`header.X-Empty == ""`, true},
			{`header.X-Missing`, false},
			{`header.host == "api.example.com"`, true},
			{`header.Content-Type ~= "^application/x-www-form-urlencoded"`, true},
			{`header.user-agent ~= "Mozilla"`, true},
			{`header.Cookie ~= "vip="`, true},
		}},
		{"header normalized", normReq, "", []check{
			{`header.X-Channel == "app"`, true},
			{`header.x-channel == "app"`, true},
			{`header.X-Empty`, true},
			{`cookie.vip`, true},
		}},
		{"cookie", formReq, "", []check{
			{`cookie.sid == "s1"`, true},
			{`cookie.vip`, true}, // present with an empty value
			{`cookie.vip == ""`, true},
			{`cookie.theme == "dark"`, true}, // quotes removed
			{`cookie.lang == "zh"`, true},    // second Cookie line
			{`cookie.SID`, false},            // names are case-sensitive
			{`cookie.none`, false},
			{`cookie.none != "x"`, true},
		}},
		{"form", formReq, "", []check{
			{`form.amount == "100"`, true},
			{`form.amount == 100`, true},
			{`form.name == "Jürgen M"`, true},
			{`form.name ~= "^Jü"`, true},
			{`form.dup == "1"`, true},
			{`form.empty`, true},
			{`form.empty == ""`, true},
			{`form.flag`, true},
			{`form.bad == "%zz"`, true},
			{`form.abc == "x"`, true}, // key a%62c decodes to abc
			{`form.plus == "1+1"`, true},
			{`form.tail == "x%4"`, true},
			{`form.missing`, false},
			{`json.amount`, false}, // not a JSON body
		}},
		{"json", jsonReq, "", []check{
			{`json.user.id == 42`, true},
			{`json.user.id == "42"`, true},
			{`json.user.id in ["41", 42]`, true},
			{`json.user.name == "A\"B\\C/D é😀"`, true},
			{`json.user.name == "A\"B\\C/D \u00e9\ud83d\ude00"`, true},
			{`json.user.name ~= "é😀$"`, true},
			{`json.user.tags`, true},
			{`json.user.tags == "[\"x\", \"y\"]"`, false}, // containers equal nothing
			{`json.user.tags != "x"`, true},
			{`json.user.tags.1 == "y"`, true},
			{`json.user.tags.2`, false},
			{`json.user.tags.01`, false}, // not an index
			{`json.user.vip == "true"`, true},
			{`json.user.note`, true}, // null is present
			{`json.user.note == "null"`, true},
			{`json.user.missing`, false},
			{`json.user.neg == -1.5e3`, true},
			{`json.user.neg == "-1500"`, false}, // literal text, not numeric value
			{`json.items.1.id == "i2"`, true},
			{`json.items.1.qty == 3`, true},
			{`json.items.0.qty`, false},
			{`json.items.2`, false},
			{`json.items.id`, false},
			{`json.amount == 100`, true},
			{`json.amount ~= "^1\d\d$"`, true},
			{`json.dup == 2`, true}, // the last duplicate wins
			{`json.obj`, true},
			{`json.obj.x`, false},
			{`json.arr`, true},
			{`json.arr.0`, false},
			{`json.0 == "zero"`, true},
			{`json."a.b" == "dotted"`, true},
			{`json.a.b`, false},
			{`json."esc\"key" == "k"`, true},
			{`json.key == "escaped key"`, true},
			{`json.lone == "\ufffdx"`, true},
			{`json.empty`, true},
			{`json.empty == ""`, true},
			{`json.amount.x`, false},
			{`form.amount`, false},
		}},
		{"json top-level array", arrJSON, "", []check{
			{`json.0.id == 1`, true},
			{`json.1.0 == "true"`, true},
			{`json.1.1 == "false"`, true},
			{`json.2`, false},
			{`json.id`, false},
		}},
		{"json media types", plainJSON, "", []check{{`json.a.b == "c"`, true}}},
		{"json wrong content type", textJSON, "", []check{{`json.a.b`, false}, {`json.a`, false}}},
		{"json malformed", badJSON, "", []check{{`json.a`, false}, {`!json.a`, true}}},
		{"json content-encoded", gzJSON, "", []check{{`json.a`, false}}},
		{"json identity encoding", idJSON, "", []check{{`json.a == "b"`, true}}},
		{"no body", get, "", []check{{`json.a`, false}, {`form.a`, false}, {`query.a`, false}, {`cookie.a`, false}}},
		{"ipv4", get, "10.1.2.3", []check{
			{`ip`, true},
			{`ip == "10.1.2.3"`, true},
			{`ip == "::ffff:10.1.2.3"`, true},
			{`ip != "10.1.2.3"`, false},
			{`ip == "10.0.0.0/8"`, true},
			{`ip in ["192.168.0.0/16", "10.0.0.0/8"]`, true},
			{`ip in ["192.168.0.0/16", "10.1.2.4"]`, false},
			{`ip in ["::ffff:10.0.0.0/104"]`, true},
			{`ip in ["2001:db8::/32"]`, false},
			{`!(ip in ["10.1.2.3"])`, false},
		}},
		{"ipv4-mapped client", get, "::ffff:10.1.2.3", []check{
			{`ip == "10.1.2.3"`, true},
			{`ip in ["10.0.0.0/8"]`, true},
		}},
		{"ipv6", get, "2001:db8::1", []check{
			{`ip == "2001:db8::1"`, true},
			{`ip == "2001:DB8:0::1"`, true},
			{`ip in ["10.0.0.0/8", "2001:db8::/32"]`, true},
			{`ip in ["10.0.0.0/8", "::1"]`, false},
			{`ip != "::1"`, true},
		}},
		{"no client ip", get, "", []check{
			{`ip`, false},
			{`ip == "10.1.2.3"`, false},
			{`ip != "10.1.2.3"`, true},
			{`ip in ["0.0.0.0/0", "::/0"]`, false},
		}},
		{"logic", formReq, "10.0.0.1", []check{
			{`(query.cmd_id == "1" || query.cmd_id == "2") && header.X-Channel == "app"`, true},
			{`(query.cmd_id == "3" || query.cmd_id == "2") && header.X-Channel == "app"`, false},
			// && binds tighter than ||: true || (false && false)
			{`query.page == "2" || query.page == "3" && query.page == "4"`, true},
			{`(query.page == "2" || query.page == "3") && query.page == "4"`, false},
			// ! takes the whole comparison
			{`!query.page == "3"`, true},
			{`!query.page == "2"`, false},
			{`!query.page`, false},
			{`!!query.page`, true},
			{`!(query.page == "2" && cookie.vip)`, false},
			{`!query.nope && !cookie.nope`, true},
			{`query.a || query.b || query.page`, true},
			{`query.page && cookie.vip && form.flag && ip`, true},
			{`((((query.page))))`, true},
			{"query.page\n&&\tcookie.vip", true},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, ch := range tc.checks {
				e := mustCompile(t, ch.expr)
				c := ctxFor(tc.req, tc.ip)
				if got := e.Eval(c); got != ch.want {
					t.Errorf("%s = %v, want %v", ch.expr, got, ch.want)
				}
				pipeline.Release(c)
			}
		})
	}
}

// TestShortCircuit checks that the right side of && and || is not looked
// at when the left side decides: the form value would be decoded into
// c.Scratch, so the scratch must stay untouched.
func TestShortCircuit(t *testing.T) {
	req := parseRequest(t, false, formHead, formBody)
	rightRan := func(src string) bool {
		e := mustCompile(t, src)
		c := ctxFor(req, "")
		defer pipeline.Release(c)
		buf := []byte(strings.Repeat("Z", 64))
		c.Scratch = buf[:0]
		e.Eval(c)
		return buf[0] != 'Z'
	}
	for _, src := range []string{
		`query.cmd_id == "1" || form.name == "x"`,
		`query.nope == "1" && form.name == "x"`,
		`!(query.cmd_id == "1" || form.name == "x")`,
		`query.nope && form.name || query.cmd_id`,
	} {
		if rightRan(src) {
			t.Errorf("%s: the right side ran", src)
		}
	}
	// Control: when the left side does not decide, the right side runs.
	if !rightRan(`query.nope == "1" || form.name == "x"`) {
		t.Errorf("control: the right side did not run")
	}
}

// countingReader records whether anyone read the body stream.
type countingReader struct {
	r     io.Reader
	reads int
}

func (cr *countingReader) Read(p []byte) (int, error) {
	cr.reads++
	return cr.r.Read(p)
}

func TestStreamedBodyIsNotRead(t *testing.T) {
	for _, ct := range []string{"application/json", "application/x-www-form-urlencoded"} {
		req := parseRequest(t, false, "POST /x?a=1 HTTP/1.1\nHost: h\nContent-Type: "+ct, "")
		body := &countingReader{r: strings.NewReader(`{"a":"1"}`)}
		req.SetBodyStream(body, -1)
		for _, src := range []string{`json.a`, `json.a == "1"`, `form.a`, `form.a == "1"`, `form.a || json.a || query.a == "2"`} {
			e := mustCompile(t, src)
			c := ctxFor(req, "")
			if e.Eval(c) {
				t.Errorf("%s: %s is true on a streamed body", ct, src)
			}
			pipeline.Release(c)
		}
		if !mustCompile(t, `query.a == "1"`).Eval(ctxFor(req, "")) {
			t.Errorf("%s: query lost with a streamed body", ct)
		}
		if body.reads != 0 || !req.IsBodyStream() {
			t.Errorf("%s: the stream was read %d times", ct, body.reads)
		}
	}
}

func TestJSONWindow(t *testing.T) {
	pad := strings.Repeat(" ", MaxJSONScan)
	cases := []struct {
		body string
		expr string
		want bool
	}{
		{`{"a":"x","pad":"` + pad + `","b":"y"}`, `json.a == "x"`, true}, // ends inside the window
		{`{"a":"x","pad":"` + pad + `","b":"y"}`, `json.b`, false},       // beyond it
		{`{"pad":"` + pad + `","a":"x"}`, `json.a`, false},
		{`{"a":"x","pad":"` + pad[:MaxJSONScan-30] + `"} `, `json.a == "x"`, true}, // exactly fits
		{`{"a":"x","pad":"` + pad[:MaxJSONScan-30] + `"}  x`, `json.a`, false},     // garbage inside the window
		{`{"a":"x","a":"` + pad + `"}`, `json.a`, false},                           // the later duplicate wins but is cut off
		{`{"a":"x","pad":"` + pad + `","a":"y"}`, `json.a == "x"`, true},           // a duplicate beyond the window is not seen
		{`{"a":{"b":"x","pad":"` + pad + `"}}`, `json.a.b == "x"`, true},
		{`{"a":{"b":"x","pad":"` + pad + `"}}`, `json.a`, false}, // the object itself does not end in the window
		{`{"a":[1,2,"` + pad + `"]}`, `json.a.1 == 2`, true},
	}
	for i, tc := range cases {
		req := parseRequest(t, false, "POST /x HTTP/1.1\nHost: h\nContent-Type: application/json", tc.body)
		if got := mustCompile(t, tc.expr).Eval(ctxFor(req, "")); got != tc.want {
			t.Errorf("case %d: %s = %v, want %v", i, tc.expr, got, tc.want)
		}
	}
}

func TestJSONSyntax(t *testing.T) {
	valid := []string{
		`{"a":1}`, ` {"a" : 1 } `, `{"a":-0}`, `{"a":0.5e-3}`, `{"a":1E+2}`, `{"a":"\u00e9"}`,
		`{"b":[[],{},[{}]],"a":1}`, `{"b":{"c":{"d":[null,true,false]}},"a":1}`,
		`{"b":"}\"]","a":1}`, "{\"a\":1}\n",
	}
	invalid := []string{
		`{"a":1,}`, `{"a":1`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":+1}`, `{"a":1e}`,
		`{"a":-}`, `{"a":tru}`, `{"a":nul}`, `{"a":"x}`, "{\"a\":\"\x01\"}", `{"a":"\x"}`,
		`{"a":"\u12"}`, `{"a":1}}`, `{"a":1} {}`, `{"b":[1,],"a":1}`, `{"b":[1}],"a":1}`,
		`{"b":{"c"},"a":1}`, `{"b":{1:2},"a":1}`, `{a:1}`, `{"a" 1}`, `{"a":1 "b":2}`,
		`{"a":1}x`, `{"b":[}`, `{"a":NaN}`, `{"a":'x'}`, "\xef\xbb\xbf{\"a\":1}",
		`{"b":` + strings.Repeat("[", 1025) + strings.Repeat("]", 1025) + `,"a":1}`,
	}
	e := mustCompile(t, `json.a`)
	for _, body := range valid {
		req := parseRequest(t, false, "POST /x HTTP/1.1\nHost: h\nContent-Type: application/json", body)
		if !e.Eval(ctxFor(req, "")) {
			t.Errorf("json.a absent in valid %q", body)
		}
	}
	for _, body := range invalid {
		req := parseRequest(t, false, "POST /x HTTP/1.1\nHost: h\nContent-Type: application/json", body)
		if e.Eval(ctxFor(req, "")) {
			t.Errorf("json.a present in invalid %q", body)
		}
	}
}

func TestInSet(t *testing.T) {
	req := parseRequest(t, false, "GET /?k=v9 HTTP/1.1\nHost: h", "")
	var items []string
	for i := range 20 {
		items = append(items, strconv.Quote("v"+strconv.Itoa(i)))
	}
	e := mustCompile(t, `query.k in [`+strings.Join(items, ", ")+`]`)
	if e.root.set == nil {
		t.Fatal("a long list should compile to a set")
	}
	if !e.Eval(ctxFor(req, "")) {
		t.Error("v9 not found in the set")
	}
	if mustCompile(t, `query.k in [`+strings.Join(items[10:], ",")+`]`).Eval(ctxFor(req, "")) {
		t.Error("v9 found in a set without it")
	}
}

func TestCompileErrors(t *testing.T) {
	deepParens := strings.Repeat("(", MaxDepth+1) + "ip" + strings.Repeat(")", MaxDepth+1)
	deepNots := strings.Repeat("!", MaxDepth+1) + "ip"
	cases := []struct {
		src   string
		col   int
		token string
		msg   string // a part of Error()
	}{
		{`query.cmd_id == && header.X == "1"`, 17, "&&", `col 17: unexpected "&&": expected a value after ==`},
		{``, 1, "", "col 1: unexpected end of expression: expected a condition"},
		{`   `, 4, "", "unexpected end of expression"},
		{`body.x == "1"`, 1, "body.x", `col 1: "body.x": unknown source; expected query., header., cookie., form., json. or ip`},
		{`query == "1"`, 7, "==", `expected . and a name after query`},
		{`query. == "1"`, 8, "==", `unexpected "==": expected a name after query.`},
		{`cookie."" == "1"`, 8, `""`, `expected a name after cookie.`},
		{`json.`, 6, "", `expected a path segment`},
		{`json.a..b`, 8, ".b", `expected a path segment`},
		{`json."" == "1"`, 6, `""`, `empty path segment`},
		{`ip.x == "1"`, 1, "ip.x", `ip takes no name`},
		{`header."a b"`, 8, `"a b"`, `not a valid header name`},
		{`header.a:b`, 8, `a:b`, `not a valid header name`},
		{`query.a == "abc`, 12, `"abc`, `unterminated string`},
		{"query.a == \"abc\n\" || ip", 12, `"abc`, `unterminated string`},
		{`query.a == "\q"`, 13, `\q`, `unknown escape`},
		{`query.a == "\u12"`, 13, `\u12"`, `bad \u escape`},
		{`query.a == "\ud800"`, 13, `\ud800`, `bad \u escape`},
		{`query.a ~= "[a"`, 12, `"[a"`, `invalid regex: missing closing ]`},
		{`query.a ~= "(?<x"`, 12, `"(?<x"`, `invalid regex`},
		{`query.a ~= "x`, 12, `"x`, `unterminated regex`},
		{`query.a ~= 1`, 12, `1`, `expected a quoted regex after ~=`},
		{`ip ~= "1.2.3.4"`, 4, "~=", `ip cannot be matched with a regex`},
		{`ip == "1.2.3"`, 7, `"1.2.3"`, `not an IP address or CIDR prefix`},
		{`ip in ["10.0.0.0/8", "10.0.0.0/33"]`, 22, `"10.0.0.0/33"`, `not a CIDR prefix`},
		{`ip in ["::ffff:0:0/80"]`, 8, `"::ffff:0:0/80"`, `IPv4-mapped prefix must be /96 or longer`},
		{`ip == 10.0.0.1`, 7, `10.0.0.1`, `not a number; quote strings, addresses and CIDRs`},
		{`query.a == 1.2.3`, 12, `1.2.3`, `not a number`},
		{`query.a == 2abc`, 12, `2abc`, `not a number`},
		{`query.a == abc`, 12, `abc`, `expected a value after ==`},
		{`query.a in "a"`, 12, `"a"`, `expected [ after in`},
		{`query.a in []`, 13, `]`, `empty list`},
		{`query.a in ["a",]`, 17, `]`, `expected a value after [ or ,`},
		{`query.a in ["a" "b"]`, 17, `"b"`, `expected , or ] in the list`},
		{`query.a in ["a"`, 16, "", `expected , or ]`},
		{`query.a = "1"`, 9, "=", `did you mean ==?`},
		{`query.a == "1" & query.b`, 16, "&", `did you mean &&?`},
		{`query.a | query.b`, 9, "|", `did you mean ||?`},
		{`(query.a == "1" | query.b)`, 17, "|", `did you mean ||?`},
		{`query.a ~ "1"`, 9, "~", `did you mean ~=?`},
		{`query.a "x"`, 9, `"x"`, `expected ==, !=, ~=, in, && or ||`},
		{`query.a == "1" query.b`, 16, "query.b", `expected && or ||`},
		{`query.a == "1")`, 15, ")", `no ( to close`},
		{`(query.a == "1"`, 16, "", `expected ) to close the ( at col 1`},
		{`(query.a`, 9, "", `expected ==, !=, ~=, in, &&, || or )`},
		{`query.a && `, 12, "", `expected a condition`},
		{`&& query.a`, 1, "&&", `expected a condition: a source`},
		{`!= "1"`, 1, "!=", `expected a condition`},
		{`query.a == "1" ||`, 18, "", `expected a condition`},
		{deepParens, MaxDepth + 1, "(", `nesting deeper than 64`},
		{deepNots, MaxDepth + 1, "!", `nesting deeper than 64`},
		{`query."é" == && x`, 14, "&&", `col 14: unexpected "&&"`}, // columns count characters
		{`json.` + strings.Repeat("a.", maxPathSegments) + `a`, 5 + 2*maxPathSegments + 1, "a", `json path longer than 64 segments`},
	}
	for _, tc := range cases {
		_, err := Compile(tc.src)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Compile(%q) = %v, want a *SyntaxError", tc.src, err)
			continue
		}
		if se.Col != tc.col || se.Token != tc.token || !strings.Contains(se.Error(), tc.msg) {
			t.Errorf("Compile(%q):\n got col %d token %q: %s\nwant col %d token %q: ...%s...",
				tc.src, se.Col, se.Token, se.Error(), tc.col, tc.token, tc.msg)
		}
		if se.Pos < 0 || se.Pos > len(tc.src) || !strings.HasPrefix(tc.src[se.Pos:], se.Token) {
			t.Errorf("Compile(%q): Pos %d does not point at token %q", tc.src, se.Pos, se.Token)
		}
	}
}

func TestDepthLimitAccepts(t *testing.T) {
	src := strings.Repeat("(", MaxDepth) + "ip" + strings.Repeat(")", MaxDepth)
	mustCompile(t, src)
	mustCompile(t, strings.Repeat("!", MaxDepth)+"ip")
	// Long flat chains are not nesting.
	mustCompile(t, strings.Repeat("query.a == \"1\" || ", 1000)+"ip")
}

// Expr is a route condition.
var _ interface{ Eval(*pipeline.Ctx) bool } = (*Expr)(nil)

// TestConcurrentEval shares one compiled expression between goroutines, each
// with its own request, as the gateway's workers do (run with -race).
func TestConcurrentEval(t *testing.T) {
	e := mustCompile(t, realistic)
	done := make(chan bool)
	for g := range 8 {
		req := parseRequest(t, false, formHead, formBody)
		if g%2 == 1 {
			req = parseRequest(t, false, realisticJSONHead, jsonBody)
		}
		go func() {
			ok := true
			for range 500 {
				c := ctxFor(req, "10.9.8.7")
				ok = ok && e.Eval(c)
				pipeline.Release(c)
			}
			done <- ok
		}()
	}
	for range 8 {
		if !<-done {
			t.Error("a concurrent evaluation came out false")
		}
	}
}

// TestHugeValueScratch checks that decoding a huge form value does not leave
// a huge buffer behind in the pooled Ctx.
func TestHugeValueScratch(t *testing.T) {
	val := strings.Repeat("%41", source.MaxScratch)
	req := parseRequest(t, false, "POST /x HTTP/1.1\nHost: h\nContent-Type: application/x-www-form-urlencoded", "a=1&big="+val)
	c := ctxFor(req, "")
	defer pipeline.Release(c)
	if !mustCompile(t, `form.big ~= "^A+$" && form.a == 1`).Eval(c) {
		t.Fatal("the huge value did not decode")
	}
	if cap(c.Scratch) > source.MaxScratch {
		t.Errorf("c.Scratch grew to %d bytes", cap(c.Scratch))
	}
}
