package upstream

import (
	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/internal/bytesconv"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

// Edge is what the proxy step needs to know about the edge: which peers are
// trusted proxies and which names are reserved for internal callers.
type Edge struct {
	Trusted  codec.Trusted
	Internal codec.Internal
}

// Forwarding is the filter that turns the client's request into the one
// the backend gets: the canonical target (or a rewrite's), the routed
// Host, the client's fields in their order less what must not cross the
// edge, and the gateway's forwarding, identity and trace fields. It runs
// last in the chain of every route that forwards, after every filter that
// reads the client's request, and the Service is the chain's action.
type Forwarding struct {
	Edge *Edge
	// Policy is the route's header policy; nil lets every field pass.
	Policy *codec.HeaderPolicy
}

var (
	errFormTooLarge = pipeline.NewCanned(fasthttp.StatusRequestEntityTooLarge,
		"form body too large to inspect for reserved parameters")
	strFormURLEncoded = []byte("application/x-www-form-urlencoded")
)

// Handle implements pipeline.Filter.
func (f *Forwarding) Handle(c *pipeline.Ctx) pipeline.Verdict {
	if !stripForm(c, &f.Edge.Internal) {
		return c.Reject(errFormTooLarge)
	}
	PrepareRequest(c, f.Edge, f.Policy)
	return pipeline.Continue
}

// stripForm removes reserved parameters from an urlencoded body. A body
// too large to hold (it streams) cannot be inspected and is refused: it
// could carry the very names the query may not.
func stripForm(c *pipeline.Ctx, in *codec.Internal) bool {
	if len(in.QueryPrefixes) == 0 || !isFormURLEncoded(c.Req.Header.ContentType()) {
		return true
	}
	if c.Req.IsBodyStream() {
		return false
	}
	body := c.Req.Body()
	if out, changed := in.StripParams(c.Scratch[:0], body); changed {
		c.Req.SetBody(out)
		c.Scratch = out[:0]
	}
	return true
}

func isFormURLEncoded(ct []byte) bool {
	if len(ct) < len(strFormURLEncoded) {
		return false
	}
	for i, b := range strFormURLEncoded {
		x := ct[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if x != b {
			return false
		}
	}
	return len(ct) == len(strFormURLEncoded) || ct[len(strFormURLEncoded)] == ';' || ct[len(strFormURLEncoded)] == ' '
}

// PrepareRequest rewrites c.Req for the trip upstream (see Forwarding).
func PrepareRequest(c *pipeline.Ctx, e *Edge, policy *codec.HeaderPolicy) {
	peer := c.Peer.Addr().Unmap()
	client := c.ClientIP
	if !client.IsValid() {
		client = peer
	}
	host := c.Target.Host
	if c.UpstreamHost != nil {
		host = c.UpstreamHost
	}
	l := &c.Fields
	codec.CollectFields(l, &c.Req.Header, &codec.Outgoing{
		Host: host, ClientHost: c.Target.Host,
		Peer: peer, Client: client,
		PeerTrusted: e.Trusted != nil && peer.IsValid() && e.Trusted.Contains(peer),
		Internal:    &e.Internal, Policy: policy,
	})
	if c.Consumer != "" {
		l.AddString("X-Consumer", bytesconv.S2B(c.Consumer))
	}
	if c.UserID != "" {
		l.AddString("X-User-Id", bytesconv.S2B(c.UserID))
	}
	c.Scratch = c.Trace.AppendTraceparent(c.Scratch[:0])
	l.AddString("traceparent", c.Scratch)
	l.AddString("X-Request-Id", c.Trace.RequestID)

	path := c.Target.Path
	if c.UpstreamPath != nil {
		path = c.UpstreamPath
	}
	query, _ := e.Internal.StripParams(c.Scratch[:0], c.Target.Query)
	codec.Apply(c.Req, l, path, query, c.Target.HasQuery)
}
