package edgetls

import (
	"bytes"
	"errors"
	"net"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

// Redirect is a route's redirect_https: a request that came in cleartext
// is answered 308 with the same URL on https, before anything else of the
// route runs (no credential is asked for, or checked, over cleartext).
type Redirect struct {
	port []byte // ":8443", empty for 443
}

var (
	strLocation = []byte("Location")
	strHTTPS    = []byte("https://")
	redirected  = []byte(`{"code":308,"message":"this route is served over https"}`)
	strJSON     = []byte("application/json")
)

func init() {
	pipeline.Register(pipeline.Feature{
		Key: "redirect_https", Stage: pipeline.StageChannel, Scope: pipeline.ScopeRoute,
		Config: func() any { return new(bool) },
		Build: func(b *pipeline.Build, cfg any) (pipeline.Filter, error) {
			if !*cfg.(*bool) {
				return nil, nil
			}
			ls, _ := pipeline.ListenersKey.Get(b.Env)
			port := PortOf(ls.TLS)
			if ls.TLS == "" {
				return nil, errors.New("redirect_https needs a tls block (a TLS listener to send clients to)")
			}
			r := &Redirect{}
			if port != "443" {
				r.port = []byte(":" + port)
			}
			return r, nil
		},
	})
}

// Handle implements pipeline.Filter.
func (r *Redirect) Handle(c *pipeline.Ctx) pipeline.Verdict {
	if c.TLS {
		return pipeline.Continue
	}
	loc := append(c.Scratch[:0], strHTTPS...)
	loc = append(loc, hostOnly(c.Target.Host)...)
	loc = append(loc, r.port...)
	loc = append(loc, c.Target.Path...)
	if c.Target.HasQuery {
		loc = append(loc, '?')
		loc = append(loc, c.Target.Query...)
	}
	c.Scratch = loc
	c.Resp.Reset()
	c.Resp.SetStatusCode(fasthttp.StatusPermanentRedirect)
	c.Resp.Header.SetCanonical(strLocation, loc)
	c.Resp.Header.SetContentTypeBytes(strJSON)
	c.Resp.SetBodyRaw(redirected)
	c.Decision = "redirect to https"
	return pipeline.Stop
}

// hostOnly is a validated Host without its port.
func hostOnly(host []byte) []byte {
	if i := bytes.LastIndexByte(host, ':'); i >= 0 && bytes.IndexByte(host[i:], ']') < 0 {
		return host[:i]
	}
	return host
}

// PortOf is the port of a listen address ("443" for ":443").
func PortOf(listen string) string {
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	return port
}
