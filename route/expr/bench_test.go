package expr

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// realistic touches every source: query (repeated key), a header sent in
// another case, a cookie, a percent-encoded form value or an escaped JSON
// string (both decoded into the scratch buffer), a regex, a set and the
// client address.
const realistic = `(query.cmd_id == "1" || query.cmd_id == "2") && header.X-Channel == "app" && cookie.vip &&
	(form.name == "Jürgen M" || json.user.name ~= "é😀$" && json.user.tags.1 in ["y", "z"]) &&
	header.User-Agent ~= "^Mozilla/" && ip in ["10.0.0.0/8", "2001:db8::/32"]`

// realisticJSONHead is a JSON request on which realistic is true.
const realisticJSONHead = `POST /pay?cmd_id=2 HTTP/1.1
Host: api.example.com
X-Channel: app
User-Agent: Mozilla/5.0
Cookie: vip=1
Content-Type: application/json`

func BenchmarkEval(b *testing.B) {
	formReq := parseRequest(b, false, formHead, formBody)
	jsonReq := parseRequest(b, false, realisticJSONHead, jsonBody)
	// A 16 KiB JSON body with the wanted field at the end.
	bigJSON := `{"pad":[` + strings.Repeat(`{"k":"v","n":12345,"b":true},`, 560) + `null],"user":{"id":42}}`
	bigReq := parseRequest(b, false, "POST /x HTTP/1.1\nHost: h\nContent-Type: application/json", bigJSON)
	cases := []struct {
		name, expr string
		req        *fasthttp.Request
		ip         string
	}{
		{"query", `query.cmd_id == "1" || query.cmd_id == "2"`, formReq, ""},
		{"header", `header.X-Channel == "app"`, formReq, ""},
		{"header-absent", `header.X-Missing`, formReq, ""},
		{"cookie", `cookie.vip`, formReq, ""},
		{"form", `form.amount == "100"`, formReq, ""},
		{"form-decoded", `form.name == "Jürgen M"`, formReq, ""},
		{"json", `json.amount == 100`, jsonReq, ""},
		{"json-nested-escaped", `json.user.name ~= "é"`, jsonReq, ""},
		{"json-16KiB", `json.user.id == 42`, bigReq, ""},
		{"ip-in", `ip in ["192.168.0.0/16", "172.16.0.0/12", "10.0.0.0/8"]`, formReq, "10.1.2.3"},
		{"spec-example", `(query.cmd_id == "1" || query.cmd_id == "2") && header.X-Channel == "app"`, formReq, ""},
		{"realistic-form", realistic, formReq, "10.0.0.1"},
		{"realistic-json", realistic, jsonReq, "10.0.0.1"},
	}
	for _, tc := range cases {
		e := mustCompile(b, tc.expr)
		c := ctxFor(tc.req, tc.ip)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e.Eval(c)
			}
		})
	}
}

func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(realistic); err != nil {
			b.Fatal(err)
		}
	}
}
