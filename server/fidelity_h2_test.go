package server_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/server/h2"
	"github.com/valyala/fasthttp"
)

// TestFidelityH2 is the fidelity suite's generator run over HTTP/2 beside
// HTTP/1.1: for every generated request h2 can carry (lower-case names,
// no connection-specific fields), what the backend receives over h2 is
// what it receives over HTTP/1.1 — the same request line and the same
// fields, their order aside — and a request HTTP/1.1 refuses is refused
// over h2 too (400, or a stream reset where x/net is stricter).
func TestFidelityH2(t *testing.T) {
	cases := 1500
	if testing.Short() {
		cases = 100
	}
	e := gatewaytest.StartH2(t, gatewaytest.OneService, h2.Options{}, gatewaytest.Options{})
	r := e.DialH2(t)
	rnd := rand.New(rand.NewPCG(7, 7))
	carried, refusedBoth, stricter := 0, 0, 0
	for i := range cases {
		method, target, fields := genRequest(rnd)
		if !h2Carries(fields) {
			continue
		}
		carried++
		// Over HTTP/1.1, through the same TLS listener.
		before := e.Up.Count()
		st1, req1 := h1Case(t, e, method, target, fields)
		var up1 testutil.RawRequest
		if e.Up.Count() > before {
			up1 = req1
		}
		// Over h2.
		hf := []string{":method", method, ":scheme", "https", ":authority", "api.example.com", ":path", target}
		for _, f := range fields {
			hf = append(hf, strings.ToLower(f[0]), f[1])
		}
		var body []byte
		if method == "POST" || method == "PUT" {
			body = []byte("b=1")
			hf = append(hf, "content-length", "3")
		}
		before = e.Up.Count()
		o := r.Await(r.Send(body, hf...))
		if o.GoAway {
			t.Fatalf("case %d: the connection was closed", i)
		}
		forwarded2 := e.Up.Count() > before
		switch {
		case up1.Head == "" && forwarded2:
			last, _ := e.Up.Last()
			t.Fatalf("case %d: %s %s %q: refused over HTTP/1.1 (%d), forwarded over h2:\n%s", i, method, target, fields, st1, last.Head)
		case up1.Head == "":
			refusedBoth++
		case !forwarded2:
			// x/net refuses a few targets HTTP/1.1 takes (it parses :path
			// as a URL): stricter is allowed, looser is not.
			if o.Reset == 0 && o.Status != "400" {
				t.Fatalf("case %d: %s %s: not forwarded over h2 yet answered %s", i, method, target, o.Status)
			}
			stricter++
		default:
			up2, _ := e.Up.Last()
			if d := sameForwarded(up1, up2); d != "" {
				t.Fatalf("case %d: %s %s %q: %s\nh1:\n%s\nh2:\n%s", i, method, target, fields, d, up1.Head, up2.Head)
			}
		}
	}
	t.Logf("%d of %d generated requests carried over h2: %d refused by both, %d refused over h2 only, the rest forwarded alike",
		carried, cases, refusedBoth, stricter)
}

// h2Carries reports whether HTTP/2 can carry the fields at all: no
// connection-specific field (x/net resets those), TE only as "trailers".
func h2Carries(fields [][2]string) bool {
	for _, f := range fields {
		switch strings.ToLower(f[0]) {
		case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
			return false
		case "te":
			if f[1] != "trailers" {
				return false
			}
		}
	}
	return true
}

// h1Case sends one request over TLS and HTTP/1.1; it returns the status
// and what the backend last received.
func h1Case(t *testing.T, e *gatewaytest.TLSEdge, method, target string, fields [][2]string) (int, testutil.RawRequest) {
	t.Helper()
	c, err := e.Dial(t, "a.test", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	raw, _ := fidelityRequest(method, target, fields)
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	var resp fasthttp.Response
	resp.SkipBody = method == "HEAD"
	if err := resp.Read(bufio.NewReader(c)); err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	last, _ := e.Up.Last()
	return resp.StatusCode(), last
}

// sameForwarded compares two forwarded requests: request line and body
// exactly, fields as sets (names folded; the gateway's per-request values
// — trace, request id — set aside; cookie fields joined with "; ", as
// RFC 9113 §8.2.3 has an HTTP/2 request's cookies passed to HTTP/1.1).
func sameForwarded(a, b testutil.RawRequest) string {
	if a.Line() != b.Line() {
		return fmt.Sprintf("request line %q over h1, %q over h2", a.Line(), b.Line())
	}
	if !bytes.Equal(a.Body, b.Body) {
		return fmt.Sprintf("body %q over h1, %q over h2", a.Body, b.Body)
	}
	norm := func(r testutil.RawRequest) []string {
		var out, cookies []string
		for _, f := range r.Fields() {
			k, v, _ := strings.Cut(f, ":")
			k = strings.ToLower(k)
			switch k {
			case "traceparent", "x-request-id":
				continue
			case "cookie":
				cookies = append(cookies, strings.TrimSpace(v))
				continue
			}
			out = append(out, k+":"+strings.TrimSpace(v))
		}
		if len(cookies) > 0 {
			out = append(out, "cookie:"+strings.Join(cookies, "; "))
		}
		slices.Sort(out)
		return out
	}
	if fa, fb := norm(a), norm(b); !slices.Equal(fa, fb) {
		return fmt.Sprintf("fields %q over h1, %q over h2", fa, fb)
	}
	return ""
}
