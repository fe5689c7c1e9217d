package main

import (
	"fmt"
	"net"
	"strconv"

	"github.com/valyala/fasthttp"
)

// demoUpstream is the backend the built-in demo config routes to: it echoes
// what it received as JSON, which shows at once what the gateway forwards.
type demoUpstream struct {
	ln   net.Listener
	srv  *fasthttp.Server
	name string // JSON string: what "upstream" says in each answer
}

func startDemoUpstream() (*demoUpstream, error) {
	return listenDemoUpstream("127.0.0.1:0", "tollgate demo")
}

func listenDemoUpstream(addr, name string) (*demoUpstream, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("starting demo upstream: %w", err)
	}
	d := &demoUpstream{ln: ln, name: strconv.Quote(name)}
	d.srv = &fasthttp.Server{Handler: d.handle, NoDefaultServerHeader: true}
	go d.srv.Serve(ln) //nolint:errcheck
	return d, nil
}

func (d *demoUpstream) Addr() string { return d.ln.Addr().String() }

func (d *demoUpstream) Close() { _ = d.srv.Shutdown() }

func (d *demoUpstream) handle(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("application/json")
	b := ctx.Response.BodyWriter()
	w := func(s string) { _, _ = b.Write([]byte(s)) }
	w(`{"upstream":`)
	w(d.name)
	w(`,"method":`)
	w(strconv.Quote(string(ctx.Method())))
	w(`,"uri":`)
	w(strconv.Quote(string(ctx.RequestURI())))
	w(`,"headers":{`)
	first := true
	for k, v := range ctx.Request.Header.All() {
		if !first {
			w(",")
		}
		first = false
		w(strconv.Quote(string(k)))
		w(":")
		w(strconv.Quote(string(v)))
	}
	w("}}\n")
}
