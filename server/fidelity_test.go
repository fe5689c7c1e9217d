package server_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/valyala/fasthttp"
)

// The fidelity suite: generated requests go through a real gateway to a
// recording upstream, and what arrives is compared with what a reference
// model of SPEC §1 ("One canonical request, forwarded faithfully") says
// should arrive. The model is written apart from codec, from the SPEC's
// words, so the two can disagree.

// model is the reference's verdict on one request.
type model struct {
	refuse bool     // 400, nothing forwarded
	line   string   // upstream request line
	host   string   // upstream Host
	fields []string // client fields forwarded, in order, as "Name: value"
}

const (
	refUnreserved = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
	refPathRaw    = refUnreserved + "!$&'()*+,;=:@"
)

// refCanonical is SPEC §1's canonical path, written segment by segment.
func refCanonical(p string) (string, bool) {
	if !strings.HasPrefix(p, "/") {
		return "", false
	}
	trailing := strings.HasSuffix(p, "/")
	var out []string
	raw := strings.Split(p[1:], "/")
	for i, seg := range raw {
		last := i == len(raw)-1
		if seg == "" {
			continue // runs of '/' are one
		}
		var b strings.Builder
		suspect := false
		for j := 0; j < len(seg); j++ {
			c := seg[j]
			if c <= ' ' || c >= 0x7f {
				return "", false // RFC 9112: a request target is visible ASCII
			}
			if c == '%' {
				if j+2 >= len(seg) || !isHex(seg[j+1]) || !isHex(seg[j+2]) {
					return "", false
				}
				v := hexByte(seg[j+1], seg[j+2])
				if v < 0x20 || v == 0x7f {
					return "", false
				}
				if strings.IndexByte(refUnreserved, v) >= 0 {
					b.WriteByte(v)
				} else {
					fmt.Fprintf(&b, "%%%02X", v)
					suspect = true
				}
				j += 2
				continue
			}
			if strings.IndexByte(refPathRaw, c) >= 0 {
				b.WriteByte(c)
			} else {
				fmt.Fprintf(&b, "%%%02X", c)
				suspect = suspect || c == '\\'
			}
		}
		s := b.String()
		switch s {
		case ".":
			trailing = trailing || last
			continue
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			trailing = trailing || last
			continue
		}
		if head, _, ok := strings.Cut(s, ";"); ok && (head == "." || head == "..") {
			return "", false
		}
		if suspect && refHidesDots(s) {
			return "", false
		}
		out = append(out, s)
	}
	res := "/" + strings.Join(out, "/")
	if trailing && len(out) > 0 {
		res += "/"
	}
	return res, true
}

// refRespelled is p with escapes of unreserved characters decoded and
// every other escape in upper case, "" if p has a byte the canonical form
// escapes.
func refRespelled(p string) string {
	var b strings.Builder
	for j := 0; j < len(p); j++ {
		c := p[j]
		switch {
		case c == '%' && j+2 < len(p) && isHex(p[j+1]) && isHex(p[j+2]):
			if v := hexByte(p[j+1], p[j+2]); strings.IndexByte(refUnreserved, v) >= 0 {
				b.WriteByte(v)
			} else {
				b.WriteString(strings.ToUpper(p[j : j+3]))
			}
			j += 2
		case c == '/' || strings.IndexByte(refPathRaw, c) >= 0:
			b.WriteByte(c)
		default:
			return ""
		}
	}
	return b.String()
}

// refHidesDots decodes s up to four times, as backends that decode more
// than once would, looking for a dot segment between '/' or '\'.
func refHidesDots(s string) bool {
	for round := 0; round < 4; round++ {
		var b strings.Builder
		for j := 0; j < len(s); j++ {
			if s[j] == '%' && j+2 < len(s) && isHex(s[j+1]) && isHex(s[j+2]) {
				b.WriteByte(hexByte(s[j+1], s[j+2]))
				j += 2
				continue
			}
			b.WriteByte(s[j])
		}
		d := b.String()
		for _, piece := range strings.FieldsFunc(d, func(r rune) bool { return r == '/' || r == '\\' }) {
			head, _, _ := strings.Cut(piece, ";")
			if head == "." || head == ".." {
				return true
			}
		}
		if d == s {
			return false
		}
		if round == 3 && strings.Contains(d, "%") {
			return true
		}
		s = d
	}
	return false
}

func isHex(c byte) bool { return strings.IndexByte("0123456789abcdefABCDEF", c) >= 0 }
func hexByte(a, b byte) byte {
	v := func(c byte) byte { return byte(strings.IndexByte("0123456789abcdef", c|0x20)) }
	return v(a)<<4 | v(b)
}

// refOwned are the fields SPEC §1 makes the gateway's own.
var refOwned = []string{"x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-forwarded-port", "x-forwarded-prefix",
	"forwarded", "x-real-ip", "true-client-ip", "x-client-ip", "x-original-url", "x-rewrite-url", "x-consumer", "x-user-id",
	"traceparent", "x-request-id", "x-http-method-override"}

var refHop = []string{"connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade", "proxy-authorization",
	"content-length", "transfer-encoding", "host", "expect"}

func refNorm(name string) string { return strings.ReplaceAll(strings.ToLower(name), "_", "-") }

// refQuery strips reserved parameters the way SPEC §1 says: only their
// bytes, the rest untouched.
func refQuery(q string) string {
	var kept []string
	var seps []byte
	start := 0
	removed := false
	for i := 0; i <= len(q); i++ {
		if i < len(q) && q[i] != '&' && q[i] != ';' {
			continue
		}
		piece := q[start:i]
		key, _, _ := strings.Cut(piece, "=")
		if piece != "" && refInternalKey(key) {
			removed = true
		} else {
			if len(kept) > 0 {
				seps = append(seps, q[start-1])
			}
			kept = append(kept, piece)
		}
		start = i + 1
	}
	if !removed {
		return q
	}
	var b strings.Builder
	for i, k := range kept {
		if i > 0 {
			b.WriteByte(seps[i-1])
		}
		b.WriteString(k)
	}
	return b.String()
}

func refInternalKey(key string) bool {
	var b strings.Builder
	for j := 0; j < len(key); j++ {
		c := key[j]
		if c == '+' {
			c = ' '
		} else if c == '%' && j+2 < len(key) && isHex(key[j+1]) && isHex(key[j+2]) {
			c = hexByte(key[j+1], key[j+2])
			j += 2
		}
		b.WriteByte(c)
	}
	k := strings.TrimLeft(b.String(), "\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\v\f\r\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f ")
	k = strings.Map(func(r rune) rune {
		switch r {
		case ' ', '.', '[', '-':
			return '_'
		}
		return r
	}, strings.ToLower(k))
	return strings.HasPrefix(k, "internal_")
}

// refForward is the model: what the upstream must receive for a request
// with this method, target, Host and fields (in order).
func refForward(method, target, host string, fields [][2]string) model {
	for i := 0; i < len(target); i++ {
		if target[i] <= ' ' || target[i] >= 0x7f || target[i] == '#' {
			return model{refuse: true}
		}
	}
	cts := 0
	for _, f := range fields {
		if strings.EqualFold(f[0], "Content-Type") {
			cts++
		}
	}
	if cts > 1 {
		return model{refuse: true} // a singleton field sent twice
	}
	path, query, hasQuery := strings.Cut(target, "?")
	canon, ok := refCanonical(path)
	if !ok {
		return model{refuse: true}
	}
	// The client's spelling goes upstream when it means the canonical path.
	if refRespelled(path) == canon {
		canon = path
	}
	line := method + " " + canon
	if q := refQuery(query); hasQuery && q != "" {
		line += "?" + q
	}
	line += " HTTP/1.1"
	conn := map[string]bool{}
	for _, f := range fields {
		if refNorm(f[0]) == "connection" {
			for _, tok := range strings.Split(f[1], ",") {
				conn[strings.ToLower(strings.TrimSpace(tok))] = true
			}
		}
	}
	var out []string
	for _, f := range fields {
		n := refNorm(f[0])
		if slices.Contains(refOwned, n) || slices.Contains(refHop, strings.ToLower(f[0])) || conn[strings.ToLower(f[0])] ||
			strings.HasPrefix(n, "x-internal-") {
			continue
		}
		out = append(out, f[0]+": "+strings.Trim(f[1], " \t"))
	}
	return model{line: line, host: host, fields: out}
}

// gatewayFields are what the gateway itself appends, in order.
var gatewayFields = []string{"X-Forwarded-For", "X-Real-IP", "X-Forwarded-Proto", "X-Forwarded-Host", "traceparent", "X-Request-Id"}

// fidelityCase sends one request and compares the upstream's view with the
// model; it returns a description of the difference, or "".
// fidelityRequest is the HTTP/1.1 request of a generated case, and its
// body: Host api.example.com, the fields in order, and a 3-byte body for
// POST and PUT.
func fidelityRequest(method, target string, fields [][2]string) (raw, body string) {
	var b strings.Builder
	b.WriteString(method + " " + target + " HTTP/1.1\r\nHost: api.example.com\r\n")
	for _, f := range fields {
		b.WriteString(f[0] + ": " + f[1] + "\r\n")
	}
	if method == "POST" || method == "PUT" {
		body = "b=1"
		b.WriteString("Content-Length: 3\r\n")
	}
	b.WriteString("\r\n" + body)
	return b.String(), body
}

func fidelityCase(gwAddr string, up *testutil.RecordingUpstream, method, target string, fields [][2]string) string {
	host := "api.example.com"
	raw, body := fidelityRequest(method, target, fields)
	want := refForward(method, target, host, fields)

	before := up.Count()
	conn, err := net.DialTimeout("tcp", gwAddr, time.Second)
	if err != nil {
		return err.Error()
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := conn.Write([]byte(raw)); err != nil {
		return err.Error()
	}
	var resp fasthttp.Response
	resp.SkipBody = method == "HEAD"
	if err := resp.Read(bufio.NewReader(conn)); err != nil {
		return "no answer: " + err.Error()
	}
	forwarded := up.Count() > before
	if want.refuse {
		if resp.StatusCode() != 400 || forwarded {
			return fmt.Sprintf("model refuses; gateway answered %d, forwarded=%v", resp.StatusCode(), forwarded)
		}
		return ""
	}
	if resp.StatusCode() != 200 || !forwarded {
		return fmt.Sprintf("model forwards %q; gateway answered %d %s", want.line, resp.StatusCode(), resp.Body())
	}
	got, _ := up.Last()
	if got.Line() != want.line {
		return fmt.Sprintf("request line %q, model %q", got.Line(), want.line)
	}
	gf := got.Fields()
	if len(gf) == 0 || gf[0] != "Host: "+want.host {
		return fmt.Sprintf("first field %q, model Host: %s", gf, want.host)
	}
	gf = gf[1:]
	if len(gf) < len(want.fields) || !slices.Equal(gf[:len(want.fields)], want.fields) {
		return fmt.Sprintf("client fields %q, model %q", gf, want.fields)
	}
	rest := gf[len(want.fields):]
	var names []string
	for _, f := range rest {
		k, _, _ := strings.Cut(f, ":")
		names = append(names, k)
	}
	switch {
	case body != "":
		if len(names) == 0 || names[len(names)-1] != "Content-Length" || string(got.Body) != body {
			return fmt.Sprintf("body framing %q body %q", rest, got.Body)
		}
		names = names[:len(names)-1]
	case method != "GET" && method != "HEAD" && len(rest) > 0 && rest[len(rest)-1] == "Content-Length: 0":
		// A method whose request may have a body gets explicit framing.
		names = names[:len(names)-1]
	}
	if !slices.Equal(names, gatewayFields) {
		return fmt.Sprintf("gateway fields %q, want %q", names, gatewayFields)
	}
	return ""
}

// Generator pieces: the escapes and dot forms an attacker reaches for, and
// plain API paths.
var (
	genSegments = []string{"api", "v1", "orders", "42", "a.b", "~u", "%7Eu", "%41", "%2F", "%2f", "%3F", "%23", "%25", "%252e",
		"%252E%252E", ".", "..", "%2e", "%2E%2e", "...", "..;x", ".;", "a;b=c", "%3B", "caf%C3%A9", "caf\xc3\xa9", "%00", "%0d",
		"a%2Fb", "..%2F..", "..%5c", "a\\b", "%5C", "%zz", "%", "!$&'()*+,=:@", "{x}", "a|b", "\"q\"", "%2525252e", "x%20y", ""}
	genQueries = []string{"", "a=1", "a=1;b=2", "c=~!$'()*,:@/?", "d=%zz", "e=%2F+x", "f", "=g", "a=1&a=2", "&&", "internal_x=1",
		"internal.role=1", "%69nternal_a=1", "+internal_b=2", "INTERNAL-c=3", "x=internal_y", "k=v=w", "%3D=%26", "q=a%20b", "semi;colon"}
	genNames = []string{"Via", "VIA", "Cookie", "cookie", "X-A", "x-a", "X_A", "Accept", "User-Agent", "Content-Type",
		"X-Forwarded-For", "x_forwarded_for", "Forwarded", "X-Real-IP", "True-Client-IP", "X-Internal-Role", "X_Internal_Role",
		"x-internal-token", "Connection", "Keep-Alive", "TE", "X-Consumer", "X_User_Id", "traceparent", "X-Custom"}
	genValues = []string{"1", "a b", "  padded  ", "x=1; y=\"q 1\"", "1.0 proxy", "keep-alive", "X-A", "x-custom, X-A",
		"close", "trailers", "text/plain", "*/*", "a,b,,c", "\xc3\xa9", "v\tw"}
)

func genRequest(r *rand.Rand) (method, target string, fields [][2]string) {
	method = []string{"GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS"}[r.IntN(6)]
	n := 1 + r.IntN(5)
	var p strings.Builder
	for range n {
		p.WriteString(strings.Repeat("/", 1+r.IntN(2)/1*(r.IntN(4)/3)))
		p.WriteString(genSegments[r.IntN(len(genSegments))])
	}
	if r.IntN(4) == 0 {
		p.WriteByte('/')
	}
	target = p.String()
	if q := r.IntN(4); q > 0 {
		var parts []string
		for range q {
			parts = append(parts, genQueries[r.IntN(len(genQueries))])
		}
		target += "?" + strings.Join(parts, []string{"&", ";"}[r.IntN(2)])
	}
	for range r.IntN(8) {
		fields = append(fields, [2]string{genNames[r.IntN(len(genNames))], genValues[r.IntN(len(genValues))]})
	}
	return method, target, fields
}

// TestFidelity runs generated requests through both transports and
// compares what the upstream received with the reference model.
func TestFidelity(t *testing.T) {
	cases := 2000
	if testing.Short() {
		cases = 200
	}
	for _, kind := range gatewaytest.Transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := testutil.StartRecordingUpstream(t)
			g := gatewaytest.Start(t, gatewaytest.OneService, gatewaytest.Options{Transport: kind, Vars: map[string]string{"UP": up.Addr}})
			r := rand.New(rand.NewPCG(1, uint64(len(kind))))
			refused, failures := 0, 0
			for i := range cases {
				method, target, fields := genRequest(r)
				if refForward(method, target, "h", fields).refuse {
					refused++
				}
				if diff := fidelityCase(g.Addr, up, method, target, fields); diff != "" {
					failures++
					if failures <= 10 {
						t.Errorf("case %d: %s %s %q: %s", i, method, target, fields, diff)
					}
				}
			}
			t.Logf("%d cases, %d refused by the model", cases, refused)
		})
	}
}

// FuzzFidelity is the differential fuzzer of the same model: the fuzzer
// chooses the target and the header fields (one "Name: value" a line), the
// netpoll gateway forwards, and the upstream's view must match the model.
func FuzzFidelity(f *testing.F) {
	f.Add("GET", "/api/%2e%2e/x?a=1;internal_b=2", "Via: 1\nX_Forwarded_For: 2\nVia: 3")
	f.Add("POST", "//a/..%2F../b?c=~!$'()*,:@/?", "Cookie: a=1\nConnection: x-a\nx-a: 2\nCookie: b=2")
	f.Add("GET", "/%252e%252e/admin", "X-Internal-Role: x")
	up := testutil.StartRecordingUpstream(f)
	g := gatewaytest.Start(f, gatewaytest.OneService, gatewaytest.Options{Vars: map[string]string{"UP": up.Addr}})
	f.Fuzz(func(t *testing.T, method, target, header string) {
		switch method {
		case "GET", "POST", "PUT", "DELETE", "OPTIONS":
		default:
			return
		}
		if len(target) == 0 || target[0] != '/' || len(target) > 2048 || strings.ContainsAny(target, " \r\n") {
			return
		}
		var fields [][2]string
		for _, line := range strings.Split(header, "\n") {
			name, value, ok := strings.Cut(line, ": ")
			if !ok || !validToken(name) || !validValue(value) || strings.EqualFold(name, "Trailer") ||
				strings.EqualFold(name, "Transfer-Encoding") || strings.EqualFold(name, "Content-Length") ||
				strings.EqualFold(name, "Host") || strings.EqualFold(name, "Expect") || strings.EqualFold(name, "Upgrade") ||
				strings.EqualFold(name, "Content-Encoding") {
				continue
			}
			fields = append(fields, [2]string{name, value})
		}
		if len(fields) > 20 {
			return
		}
		if diff := fidelityCase(g.Addr, up, method, target, fields); diff != "" {
			t.Fatalf("%s %q %q: %s", method, target, fields, diff)
		}
	})
}

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(s[i])) &&
			!('0' <= s[i] && s[i] <= '9' || 'a' <= s[i]|0x20 && s[i]|0x20 <= 'z') {
			return false
		}
	}
	return true
}

func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
