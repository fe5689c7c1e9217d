// Package testutil holds helpers the tests of several packages share: real
// upstream servers on loopback and raw-socket clients.
package testutil

import (
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// Seen is what an upstream received for one request.
type Seen struct {
	Method  string
	URI     string
	Headers map[string]string
	Body    []byte
}

// Upstream is a real HTTP server on 127.0.0.1 that records what reaches it.
type Upstream struct {
	Addr     string
	Requests atomic.Int64

	// Delay makes every answer wait; Status overrides 200. Set them before
	// traffic starts or with the atomics' care.
	Delay  atomic.Int64 // nanoseconds
	Status atomic.Int64

	mu   sync.Mutex
	seen []Seen
	ln   net.Listener
	srv  *fasthttp.Server
}

// StartUpstream starts an upstream that answers 200 with body "name" and
// stops it when the test ends.
func StartUpstream(t testing.TB, name string) *Upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &Upstream{Addr: ln.Addr().String(), ln: ln}
	u.srv = &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			u.Requests.Add(1)
			s := Seen{Method: string(ctx.Method()), URI: string(ctx.RequestURI()), Headers: map[string]string{},
				Body: append([]byte(nil), ctx.PostBody()...)}
			for k, v := range ctx.Request.Header.AllInOrder() {
				s.Headers[string(k)] = string(v)
			}
			u.mu.Lock()
			u.seen = append(u.seen, s)
			u.mu.Unlock()
			if d := u.Delay.Load(); d > 0 {
				time.Sleep(time.Duration(d))
			}
			if st := u.Status.Load(); st > 0 {
				ctx.SetStatusCode(int(st))
			}
			ctx.SetBodyString(name)
		},
		DisableHeaderNamesNormalizing: true,
		MaxRequestBodySize:            64 << 20,
		ReadBufferSize:                32 << 10, // room for the large headers tests send through the gateway
	}
	go u.srv.Serve(ln) //nolint:errcheck
	t.Cleanup(u.Close)
	return u
}

// Seen returns a copy of what the upstream received so far.
func (u *Upstream) Seen() []Seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Seen(nil), u.seen...)
}

// Last returns the last request received (zero Seen if none).
func (u *Upstream) Last() Seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.seen) == 0 {
		return Seen{}
	}
	return u.seen[len(u.seen)-1]
}

// Close stops the upstream: the listener and every open connection.
func (u *Upstream) Close() { _ = u.srv.Shutdown() }

// RawUpstream is a TCP listener that counts every byte and connection it
// receives and answers nothing useful: proof that nothing was forwarded.
type RawUpstream struct {
	Addr  string
	Conns atomic.Int64
	Bytes atomic.Int64
	ln    net.Listener
}

// StartRawUpstream starts a counting listener, closed when the test ends.
func StartRawUpstream(t testing.TB) *RawUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &RawUpstream{Addr: ln.Addr().String(), ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.Conns.Add(1)
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					r.Bytes.Add(int64(n))
					if err != nil {
						return
					}
					_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return r
}

// FreeAddr returns a loopback address nothing listens on (it was listened
// on and closed), for tests of refused connections.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// StartQuietUpstream starts an upstream that only counts requests and
// answers 200 with body, allocating nothing per request, for benchmarks and
// allocation gates that run it in the same process.
func StartQuietUpstream(t testing.TB, body string) *Upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &Upstream{Addr: ln.Addr().String(), ln: ln}
	b := []byte(body)
	u.srv = &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			u.Requests.Add(1)
			ctx.SetBody(b)
		},
		DisableHeaderNamesNormalizing: true,
	}
	go u.srv.Serve(ln) //nolint:errcheck
	t.Cleanup(u.Close)
	return u
}

// Header returns the value of the named header as received, matching the
// name case-insensitively as HTTP does ("" when absent).
func (s Seen) Header(name string) string {
	for k, v := range s.Headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}
