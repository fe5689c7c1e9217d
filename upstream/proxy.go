package upstream

import (
	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/pipeline"
)

// Edge is what the proxy step needs to know about the edge: which peers are
// trusted proxies and which names are reserved for internal callers.
type Edge struct {
	Trusted  codec.Trusted
	Internal codec.Internal
}

// Proxy is the terminal action that prepares a client request for the
// backend (hop-by-hop fields out, forwarding and trace fields in, internal
// names stripped) and forwards it to Service.
type Proxy struct {
	Service *Service
	Edge    *Edge
}

var (
	strTraceparent = []byte("traceparent")
	strRequestID   = []byte("X-Request-Id")
)

// Serve implements pipeline.Action.
func (p *Proxy) Serve(c *pipeline.Ctx) {
	PrepareRequest(c, p.Edge)
	p.Service.Serve(c)
}

// PrepareRequest rewrites c.Req's header section for the trip upstream.
func PrepareRequest(c *pipeline.Ctx, e *Edge) {
	h := &c.Req.Header
	codec.StripRequestHopByHop(h)
	e.Internal.Strip(c.Req)
	peer := c.Peer.Addr().Unmap()
	trusted := e.Trusted != nil && peer.IsValid() && e.Trusted.Contains(peer)
	client := c.ClientIP
	if !client.IsValid() {
		client = peer
	}
	if peer.IsValid() {
		c.Scratch = codec.SetForwarded(h, peer, client, trusted, c.Scratch)
	} else {
		h.DelBytes([]byte("X-Forwarded-For"))
	}
	c.Scratch = c.Trace.AppendTraceparent(c.Scratch[:0])
	h.SetBytesKV(strTraceparent, c.Scratch)
	h.SetBytesKV(strRequestID, c.Trace.RequestID)
}
