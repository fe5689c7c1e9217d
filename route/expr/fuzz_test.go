package expr

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/pipeline"
)

var fuzzExprs = []string{
	`(query.cmd_id == "1" || query.cmd_id == "2") && header.X-Channel == "app"`,
	`cookie.vip && !form.name ~= "^J" || json.user.tags.1 in ["y", 2, "z"]`,
	`ip in ["10.0.0.0/8", "2001:db8::/32"] && json.a.b.c != "x"`,
	`json."a.b".0 == -1.5e3 || header."X-Y" ~= "(?i)^app$"`,
	`!!!(query.a)`, `query.a == "\u00e9\n"`, `query.a in ["a"`, `ip ~= "x"`, `body.x`,
	`json.0.0.0`, `form.a%20b == "c"`,
}

// fuzzRequests are fixed requests every compiled expression is evaluated
// against.
func fuzzRequests(tb testing.TB) []*fasthttp.Request {
	stream := parseRequest(tb, false, "POST /s?a=1 HTTP/1.1\nHost: h\nContent-Type: application/json", "")
	stream.SetBodyStream(strings.NewReader(`{"a":1}`), -1)
	return []*fasthttp.Request{
		parseRequest(tb, false, formHead, formBody),
		parseRequest(tb, true, formHead, formBody),
		parseRequest(tb, false, jsonHead, jsonBody),
		parseRequest(tb, false, "GET / HTTP/1.1\nHost: h", ""),
		stream,
	}
}

func FuzzCompile(f *testing.F) {
	for _, s := range fuzzExprs {
		f.Add(s)
	}
	reqs := fuzzRequests(f)
	f.Fuzz(func(t *testing.T, src string) {
		e, err := Compile(src)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Compile(%q) returned %T, want *SyntaxError", src, err)
			}
			if se.Pos < 0 || se.Pos > len(src) || se.Col != utf8.RuneCountInString(src[:se.Pos])+1 {
				t.Fatalf("Compile(%q): bad position %d col %d", src, se.Pos, se.Col)
			}
			if !strings.HasPrefix(src[se.Pos:], se.Token) {
				t.Fatalf("Compile(%q): token %q is not at %d", src, se.Token, se.Pos)
			}
			_ = se.Error()
			return
		}
		if e.String() != src {
			t.Fatalf("String() = %q, want %q", e.String(), src)
		}
		for _, req := range reqs {
			for _, ip := range []string{"", "10.1.2.3", "2001:db8::1"} {
				c := ctxFor(req, ip)
				got := e.Eval(c)
				if again := e.Eval(c); again != got {
					t.Fatalf("%q evaluates to %v then %v", src, got, again)
				}
				pipeline.Release(c)
			}
		}
	})
}

// FuzzEval evaluates fixed expressions over arbitrary JSON and form bodies:
// none may crash or allocate without bound (the scanners themselves are
// checked against encoding/json and fasthttp in package source).
func FuzzEval(f *testing.F) {
	f.Add([]byte(jsonBody))
	f.Add([]byte(formBody))
	f.Add([]byte(`{"a":{"b":"x\u00e9"},"items":[{"id":1},{"id":"\ud83d\ude00"}],"0":null}`))
	f.Add([]byte(`[{"a":1},[2]]`))
	f.Add([]byte(`{"a":1,"a":{"b":[1,2,{"c":"\"d\""}]}}`))
	f.Add([]byte(`a=1&a=2&b=%zz&c+d=e+f&&=&g`))
	exprs := []*Expr{}
	for _, s := range []string{
		`json.a == "1" || json.a.b ~= "x" || json.items.1.id in ["1", 2]`,
		`json.a || json.0 || json.a.b.c == "" || !json.items.0`,
		`form.a == "1" && form.b != "2" || form."c d" ~= "f$"`,
		`form.a || form.g || form.name == "Jürgen M"`,
	} {
		exprs = append(exprs, mustCompile(f, s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, ct := range []string{"application/json", "application/x-www-form-urlencoded"} {
			req := new(fasthttp.Request)
			req.Header.SetMethod("POST")
			req.SetRequestURI("/x")
			req.Header.SetContentType(ct)
			req.SetBody(body)
			c := ctxFor(req, "")
			for _, e := range exprs {
				e.Eval(c)
			}
			pipeline.Release(c)
		}

	})
}
