// Package pipeline holds what a request carries through the gateway: the pooled
// Ctx, the Filter and ResponseFilter contracts, the per-route Chain, and the
// canned error answers every gateway-made response uses.
package pipeline

import (
	"net/netip"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// Ctx is the state of one request on its way through the gateway.
//
// A Ctx is owned by exactly one goroutine from Acquire to Release; it is not
// safe for concurrent use. Every []byte reached through it (headers, body,
// IDs) is valid only until Release: copy what must outlive the request.
type Ctx struct {
	// Req and Resp are the request being served and the answer being built.
	// They belong to the transport (fasthttp.Server's RequestCtx, or the
	// netpoll connection's own pair) and are reused after Release.
	Req  *fasthttp.Request
	Resp *fasthttp.Response

	// Peer is the TCP peer; ClientIP is the caller as the gateway believes it,
	// which differs from Peer only when Peer is a trusted proxy.
	Peer     netip.AddrPort
	ClientIP netip.Addr

	// Start is when the request's headers were parsed.
	Start time.Time

	Trace Trace

	// Consumer is the authenticated caller (a consumer's app_key, or a
	// token's subject) and UserID the end user it acts for, "" when
	// unauthenticated. Both point into config or a verified-token cache,
	// so setting them allocates nothing.
	Consumer string
	UserID   string

	// Choice is a route action's pick made earlier in the chain (a split's
	// target, 1-based), 0 when none was made.
	Choice int

	// RouteName names the matched route ("" when none matched). It points
	// into the config snapshot, so it costs no allocation.
	RouteName string
	// ConfigVersion is the version of the snapshot the request runs on.
	ConfigVersion uint64

	// Upstream is the address of the instance that answered last, and
	// UpstreamTime how long the upstream exchange(s) took.
	Upstream     string
	UpstreamTime time.Duration
	// Attempts counts upstream tries (1 normally, 2 after a retry).
	Attempts int

	// Decision says, for the access log, why the gateway answered as it did
	// when it was not the upstream ("" for a proxied answer).
	Decision string

	// CloseConn asks the transport to close the client connection after
	// writing the response (a framing error, a drain).
	CloseConn bool

	// Scratch is a reusable buffer for filters; its contents do not survive
	// from one filter to the next unless a filter says so.
	Scratch []byte
}

var ctxPool = sync.Pool{New: func() any { return &Ctx{Scratch: make([]byte, 0, 256)} }}

// Acquire returns a reset Ctx bound to req and resp.
func Acquire(req *fasthttp.Request, resp *fasthttp.Response) *Ctx {
	c := ctxPool.Get().(*Ctx)
	c.Req, c.Resp = req, resp
	return c
}

// Release resets c and returns it to the pool; c must not be used afterwards.
func Release(c *Ctx) {
	scratch := c.Scratch[:0]
	*c = Ctx{Scratch: scratch}
	ctxPool.Put(c)
}

// Reject makes the gateway's own answer from a canned error and stops the
// chain. It replaces whatever response was being built.
func (c *Ctx) Reject(e *Canned) Verdict {
	e.WriteTo(c)
	return Stop
}

// Method reports the request method; valid until Release.
func (c *Ctx) Method() []byte { return c.Req.Header.Method() }
