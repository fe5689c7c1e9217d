package upstream

import (
	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/internal/bytesconv"
	"github.com/tollgate/tollgate/pipeline"
)

// Edge is what the proxy step needs to know about the edge: which peers are
// trusted proxies and which names are reserved for internal callers.
type Edge struct {
	Trusted  codec.Trusted
	Internal codec.Internal
}

// Forwarding is the filter that prepares a client request for a backend:
// hop-by-hop fields out, forwarding and trace fields in, internal names
// stripped. It runs first in the chain of every route that forwards, so
// later filters (a rewrite of Host, say) see and keep its work; the
// Service is the chain's action.
type Forwarding struct {
	Edge *Edge
}

var (
	strTraceparent = []byte("traceparent")
	strRequestID   = []byte("X-Request-Id")
	strConsumer    = []byte("X-Consumer")
	strUserID      = []byte("X-User-Id")
)

// Handle implements pipeline.Filter.
func (f *Forwarding) Handle(c *pipeline.Ctx) pipeline.Verdict {
	PrepareRequest(c, f.Edge)
	return pipeline.Continue
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
	// The identity fields are the gateway's word, never the client's.
	h.DelBytes(strConsumer)
	h.DelBytes(strUserID)
	if c.Consumer != "" {
		h.SetBytesKV(strConsumer, bytesconv.S2B(c.Consumer))
	}
	if c.UserID != "" {
		h.SetBytesKV(strUserID, bytesconv.S2B(c.UserID))
	}
	c.Scratch = c.Trace.AppendTraceparent(c.Scratch[:0])
	h.SetBytesKV(strTraceparent, c.Scratch)
	h.SetBytesKV(strRequestID, c.Trace.RequestID)
}
