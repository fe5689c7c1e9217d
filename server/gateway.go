// Package server runs the client side of the gateway: a transport (the
// reactor's event loops, server/reactor, or fasthttp.Server,
// server/fasthttpserve; transport.go chooses) accepts connections and
// parses requests, and the Gateway serves each parsed request on the
// current config snapshot.
package server

import (
	"sync/atomic"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/observe"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/server/transport"
	"github.com/tollgate/tollgate/trace"
	"github.com/tollgate/tollgate/trace/tracing"
	"github.com/valyala/fasthttp"
)

// Gateway serves parsed requests. Both transports call it; it is safe for
// concurrent use.
type Gateway struct {
	// limits are the client limits the transport was set up with; like
	// the transport's, they change only with a restart.
	limits    codec.Limits
	snap      atomic.Pointer[config.Snapshot]
	log       atomic.Pointer[observe.AccessLog]
	Stats     observe.Stats
	observers atomic.Pointer[[]pipeline.Observer]
	// draining makes every answer close its connection (see Drain).
	draining atomic.Bool
}

// Drain makes every answer from now on carry Connection: close, so
// keep-alive clients leave before the transport shuts down.
func (g *Gateway) Drain() { g.draining.Store(true) }

// Draining reports whether Drain was called: a transport whose
// connections outlive one answer (HTTP/2) tells its clients to go.
func (g *Gateway) Draining() bool { return g.draining.Load() }

// NewGateway returns a gateway serving snap.
func NewGateway(snap *config.Snapshot, log *observe.AccessLog) *Gateway {
	g := &Gateway{limits: snap.Limits}
	g.snap.Store(snap)
	if log != nil {
		g.log.Store(log)
	}
	return g
}

// Snapshot returns the configuration new requests run on.
func (g *Gateway) Snapshot() *config.Snapshot { return g.snap.Load() }

// Swap installs snap for new requests; requests already running finish on
// the snapshot they started with. It returns the previous snapshot.
func (g *Gateway) Swap(snap *config.Snapshot) *config.Snapshot { return g.snap.Swap(snap) }

// DetachLog stops access logging and returns the log so it can be flushed.
func (g *Gateway) DetachLog() *observe.AccessLog { return g.log.Swap(nil) }

// Serve implements transport.Handler: it handles one request the
// transport has parsed (headers, and the body or the start of its stream)
// and leaves the answer in c.Resp (or c.Answer), a protocol switch in
// c.Upgrade. It reports whether the client connection must be closed
// after the answer. On an event loop (c.Loop) the request's waits and its
// upstream connections are the loop's. The transport writes the answer,
// then releases c.
//
// Every request takes the same way: begin (trace, counters), admission
// (the edge's checks, the canonical target, the client's address), the
// global filters, the route's chain (or the no-route answer), and finish
// (trace headers, access log, counters, observers).
func (g *Gateway) Serve(c *pipeline.Ctx) (closeConn bool) { return g.serve(c, false) }

func (g *Gateway) serve(c *pipeline.Ctx, secure bool) (closeConn bool) {
	snap := g.snap.Load()
	g.begin(c)
	c.TLS = secure
	c.ConfigVersion = snap.Version
	err := g.admit(snap, c)
	// After the check, which indexed the fields the trace is read from.
	tr := tracing.Of(snap.Env())
	tr.Begin(c)
	if err != nil {
		cannedFor(err).WriteTo(c)
		c.CloseConn = true
		g.Stats.ParseError(c.Stripe())
	} else {
		g.route(snap, c)
	}
	if up := c.Upgrade; up != nil && (up.Conn == nil || c.Resp.StatusCode() != fasthttp.StatusSwitchingProtocols) {
		// No switch made, or a later step replaced the 101: the transport
		// takes c.Upgrade only with a 101 and a connection to relay.
		if up.Conn != nil {
			_ = up.Conn.Close()
		}
		c.Upgrade = nil
	}
	return g.finish(c, tr)
}

// begin starts a request the transport handed over: its waits go to the
// loop it runs on, if any.
func (g *Gateway) begin(c *pipeline.Ctx) {
	if c.Loop != nil {
		c.SetWaiter(c.Loop)
	}
	c.Start = c.Now()
	g.Stats.Begin(c.Stripe())
	c.BytesIn = len(c.Req.Header.RawHeaders()) + max(c.Req.Header.ContentLength(), 0)
}

// finish is the post-step of every request, answered or refused. The
// context stays the transport's, which writes the answer and releases it.
func (g *Gateway) finish(c *pipeline.Ctx, tr *tracing.Tracer) (closeConn bool) {
	trace.Stamp(&c.Trace, &c.Resp.Header, c.Answer)
	end := c.Now()
	tr.End(c, end)
	if l := g.log.Load(); l != nil {
		l.Record(c, end)
	}
	g.Stats.End(c.Stripe(), c.Resp.StatusCode())
	if obs := g.observers.Load(); obs != nil {
		for _, o := range *obs {
			o.Observe(c, end)
		}
	}
	return c.CloseConn || g.draining.Load()
}

// Secure is the gateway as the handler of a TLS listener: its requests
// are marked as such (X-Forwarded-Proto: https upstream).
func (g *Gateway) Secure() transport.Handler { return secureGateway{g} }

type secureGateway struct{ g *Gateway }

func (s secureGateway) Serve(c *pipeline.Ctx) bool { return s.g.serve(c, true) }

func (s secureGateway) Draining() bool { return s.g.Draining() }

func (s secureGateway) ServeError(err error, c *pipeline.Ctx) { s.g.ServeError(err, c) }

// AddObserver makes o see every request finished from now on (metrics,
// say). It is safe while serving, but meant for setup.
func (g *Gateway) AddObserver(o pipeline.Observer) {
	for {
		old := g.observers.Load()
		var next []pipeline.Observer
		if old != nil {
			next = append(next, *old...)
		}
		next = append(next, o)
		if g.observers.CompareAndSwap(old, &next) {
			return
		}
	}
}

// admit applies the edge's rules to a parsed request and fills what every
// later step reads: the canonical target and the client's address.
func (g *Gateway) admit(snap *config.Snapshot, c *pipeline.Ctx) error {
	h := &c.Req.Header
	c.ClientIP = c.Peer.Addr().Unmap() // until the proxies' word is known: refusals log the peer
	if err := c.Received.Check(h, &g.limits); err != nil {
		return err
	}
	if err := codec.ParseTarget(&c.Target, h); err != nil {
		return err
	}
	ip, err := codec.ClientIP(h, c.Peer.Addr().Unmap(), snap.Edge.Trusted)
	c.ClientIP = ip
	return err
}

func (g *Gateway) route(snap *config.Snapshot, c *pipeline.Ctx) {
	for _, f := range snap.Global {
		if f.Handle(c) == pipeline.Stop {
			return
		}
	}
	if r := snap.Router.Match(c); r != nil {
		c.RouteName = r.Name
		tracing.Routed(c, r.Path)
		g.run(r.Chain, c)
		return
	}
	switch {
	case snap.Default != nil:
		c.RouteName = "(default)"
		g.run(snap.Default, c)
	case snap.Fallback != nil:
		c.RouteName = "(fallback)"
		g.run(snap.Fallback, c)
	case snap.NotFound != nil:
		snap.NotFound.WriteTo(c)
		c.Decision = "no route"
	default:
		snap.NotFoundDefault.WriteTo(c)
	}
}

// run runs a route's chain. The upstream's answer may be kept as read
// (pipeline.Ctx.Answer) only when no filter of the chain looks at it
// (observers read only its status and body).
func (g *Gateway) run(ch *pipeline.Chain, c *pipeline.Ctx) {
	if c.Answer != nil && !ch.PassesAnswer() {
		c.Answer = nil
	}
	ch.Run(c)
}

// ServeError answers a request the transport could not parse (or that broke
// a limit while being read). The connection is always closed afterwards.
func (g *Gateway) ServeError(err error, c *pipeline.Ctx) {
	g.begin(c)
	c.ClientIP = c.Peer.Addr().Unmap()
	tr := tracing.Of(g.snap.Load().Env())
	tr.Begin(c)
	cannedFor(err).WriteTo(c)
	g.Stats.ParseError(c.Stripe())
	g.finish(c, tr)
}

// parseErrors holds the canned answer of each of codec.Errors, by index;
// byStatus those of errors from elsewhere (fasthttp's parser, timeouts),
// by the status codec.Status gives them. Both are built once and only
// read afterwards, so answering a malformed request allocates nothing.
var (
	parseErrors = func() []*pipeline.Canned {
		out := make([]*pipeline.Canned, len(codec.Errors))
		for i, err := range codec.Errors {
			out[i] = pipeline.NewCanned(codec.Status(err), codec.Message(err))
		}
		return out
	}()
	byStatus = map[int]*pipeline.Canned{
		fasthttp.StatusBadRequest:                  pipeline.NewCanned(fasthttp.StatusBadRequest, "malformed request"),
		fasthttp.StatusRequestHeaderFieldsTooLarge: pipeline.NewCanned(fasthttp.StatusRequestHeaderFieldsTooLarge, "request header fields too large"),
		fasthttp.StatusRequestURITooLong:           pipeline.NewCanned(fasthttp.StatusRequestURITooLong, "request URI too long"),
		fasthttp.StatusRequestEntityTooLarge:       pipeline.NewCanned(fasthttp.StatusRequestEntityTooLarge, "request body too large"),
		fasthttp.StatusRequestTimeout:              pipeline.NewCanned(fasthttp.StatusRequestTimeout, "request header not received in time"),
		fasthttp.StatusMethodNotAllowed:            pipeline.NewCanned(fasthttp.StatusMethodNotAllowed, "method not allowed"),
	}
)

func cannedFor(err error) *pipeline.Canned {
	if i := codec.Index(err); i >= 0 {
		return parseErrors[i]
	}
	if e := byStatus[codec.Status(err)]; e != nil {
		return e
	}
	return byStatus[fasthttp.StatusBadRequest]
}
