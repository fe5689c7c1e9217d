package tracing

import (
	"bufio"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

var codecLimits = codec.Limits{MaxHeaderBytes: 8 << 10}

// recordedCtx is a request sent with a sampled traceparent.
func recordedCtx(tb testing.TB) *pipeline.Ctx {
	return ctxFrom(tb, "GET /orders/42 HTTP/1.1\r\nHost: a\r\ntraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n\r\n")
}

// freshCtx is a request that starts its trace at the gateway.
func freshCtx(tb testing.TB) *pipeline.Ctx {
	return ctxFrom(tb, "GET /orders/42 HTTP/1.1\r\nHost: a\r\n\r\n")
}

// ctxFrom is raw as a transport reads it and the edge checks it.
func ctxFrom(tb testing.TB, raw string) *pipeline.Ctx {
	req, resp := new(fasthttp.Request), new(fasthttp.Response)
	if err := req.Header.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		tb.Fatal(err)
	}
	c := pipeline.Acquire(req, resp)
	if err := c.Received.Check(&req.Header, &codecLimits); err != nil {
		tb.Fatal(err)
	}
	return c
}
