package upstream

import (
	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/internal/ascii"
	"github.com/tollgate/tollgate/internal/bytesconv"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/trace"
	"github.com/valyala/fasthttp"
)

// Edge is what the proxy step needs to know about the edge: which peers are
// trusted proxies and which names are reserved for internal callers. config
// shares it from client: (pipeline.EdgeKey).
type Edge = pipeline.Edge

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
	errFormEncoded = pipeline.NewCanned(fasthttp.StatusUnsupportedMediaType,
		"form body with a Content-Encoding cannot be inspected for reserved parameters")
	errMultipartReserved = pipeline.NewCanned(fasthttp.StatusBadRequest,
		"malformed request: reserved parameter name in multipart body")
)

// Handle implements pipeline.Filter.
func (f *Forwarding) Handle(c *pipeline.Ctx) pipeline.Verdict {
	if refusal := stripBodyParams(c, &f.Edge.Internal); refusal != nil {
		return c.Reject(refusal)
	}
	PrepareRequest(c, f.Edge, f.Policy)
	return pipeline.Continue
}

// stripBodyParams keeps reserved parameter names out of bodies that
// backends read as parameters: removed from an urlencoded form, refused in
// a multipart one. An urlencoded body too large to hold (it streams)
// cannot be inspected and is refused: it could carry the very names the
// query may not. A streamed multipart body (an upload) is not inspected.
func stripBodyParams(c *pipeline.Ctx, in *codec.Internal) *pipeline.Canned {
	if len(in.QueryPrefixes) == 0 {
		return nil
	}
	ct := c.Req.Header.ContentType()
	form, multipart := mediaTypeIs(ct, "application/x-www-form-urlencoded"), mediaTypeIs(ct, "multipart/form-data")
	if (form || multipart) && codec.ContentEncoded(&c.Req.Header) {
		// Compressed, the names cannot be seen here, but a backend that
		// inflates the body would read them.
		return errFormEncoded
	}
	switch {
	case form:
		if c.Req.IsBodyStream() {
			return errFormTooLarge
		}
		if out, changed := in.StripParams(c.Scratch[:0], c.Req.Body()); changed {
			c.Req.SetBody(out)
			c.Scratch = out[:0]
		}
	case multipart:
		if !c.Req.IsBodyStream() && in.MultipartReserved(c.Req.Body()) {
			return errMultipartReserved
		}
	}
	return nil
}

// mediaTypeIs reports whether the Content-Type ct is of media type mt
// (lower-case), parameters aside.
func mediaTypeIs(ct []byte, mt string) bool {
	if !ascii.HasPrefixFold(ct, mt) {
		return false
	}
	return len(ct) == len(mt) || ct[len(mt)] == ';' || ct[len(mt)] == ' ' || ct[len(mt)] == '\t'
}

// PrepareRequest builds the request for the trip upstream (see
// Forwarding) in c.Fields, which every exchange writes it from
// (codec.WriteRequest); c.Req stays the client's request.
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
		TLS:         c.TLS,
		Internal:    &e.Internal, Policy: policy,
		Received: &c.Received,
	})
	if c.Consumer != "" {
		l.AddString("X-Consumer", bytesconv.S2B(c.Consumer))
	}
	if c.UserID != "" {
		l.AddString("X-User-Id", bytesconv.S2B(c.UserID))
	}
	trace.Forward(&c.Trace, l)

	// The client's path as sent unless a rewrite made a new one (which is
	// canonical: see codec.Target.ForwardPath).
	path := c.Target.ForwardPath()
	if c.UpstreamPath != nil {
		path = c.UpstreamPath
	}
	query, _ := e.Internal.StripParams(c.Scratch[:0], c.Target.Query)
	l.SetTarget(path, query, c.Target.HasQuery)
}
