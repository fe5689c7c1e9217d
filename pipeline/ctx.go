// Package pipeline holds what a request carries through the gateway: the pooled
// Ctx, the Filter and ResponseFilter contracts, the per-route Chain, and the
// canned error answers every gateway-made response uses.
package pipeline

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/internal/stripe"
	"github.com/tollgate/tollgate/trace"
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

	// TLS says the request came over a TLS connection to the gateway.
	TLS bool

	// Start is when the request's headers were parsed.
	Start time.Time

	// Target is the request's target in its one canonical form
	// (codec.ParseTarget): routing, conditions, ACLs and rewrites read it,
	// and it is what goes upstream (the path as the client spelled it when
	// that means the same, Target.ForwardPath) unless a rewrite set
	// UpstreamPath or UpstreamHost. It is filled before any filter runs.
	Target codec.Target
	// UpstreamPath and UpstreamHost, when not nil, replace Target.Path and
	// Target.Host upstream; a rewrite sets them (canonical, never decoded
	// again).
	UpstreamPath []byte
	UpstreamHost []byte
	// Received indexes the client's header section as the edge's check
	// read it; the trace and the forwarding step take fields from it.
	Received codec.Received
	// Fields is the request that goes upstream: its target and header
	// section, as the forwarding step built them. Every exchange writes
	// the upstream request from it (codec.WriteRequest), with Req's method
	// and body; Req keeps the client's header, but for a body that
	// streams, which fasthttp frames from Req's header once Fields is put
	// there.
	Fields codec.FieldList
	// BytesIn is the size of the request as the client sent it (header
	// section and declared body), taken before forwarding rewrites it.
	BytesIn int

	// Trace is the request's trace context, filled by trace.Begin once
	// the header section is checked.
	Trace trace.Context

	// Consumer is the authenticated caller (a consumer's app_key, or
	// "jwt:"+subject for a token) and UserID the end user it acts for, "" when
	// unauthenticated. Both point into config or a verified-token cache,
	// so setting them allocates nothing.
	Consumer string
	UserID   string

	// RouteName names the matched route ("" when none matched). It points
	// into the config snapshot, so it costs no allocation.
	RouteName string
	// ConfigVersion is the version of the snapshot the request runs on.
	ConfigVersion uint64

	// Outcome is what the upstream exchange did (zero when there was
	// none).
	Outcome Outcome
	// Deadline, when set (a route's own timeout), bounds the upstream
	// exchange, retry included, before the service's total does.
	Deadline time.Time

	// Decision says, for the access log, why the gateway answered as it did
	// when it was not the upstream ("" for a proxied answer).
	Decision string

	// CloseConn asks the transport to close the client connection after
	// writing the response (a framing error, a drain).
	CloseConn bool

	// Scratch is a reusable buffer for filters; its contents do not survive
	// from one filter to the next unless a filter says so. Scratch2 is a
	// second one, for steps that need two at once.
	Scratch  []byte
	Scratch2 []byte

	// Upgrade, when set, is a protocol switch the route allows and the
	// client asked for (WebSocket); after the backend's 101 it carries
	// the backend's connection, for the transport to relay.
	Upgrade *Upgrade

	// Loop is the event loop the request runs on, nil on a transport that
	// serves requests on goroutines: upstream connections are then taken
	// from that loop's own pools and waited for by it.
	Loop Loop

	// Answer, when set, is where the loop's exchange may leave an
	// upstream's answer header section as read (codec.Answer) for the
	// transport to write as it is: the transport lends its buffer here
	// before the request and writes it after. It stays set only for a
	// request whose answer nothing reads or changes after the exchange but
	// the trace stamp: a route without response filters (the gateway
	// clears it otherwise; see Observer).
	// Anything that replaces the answer resets it (Canned, Static,
	// WriteError).
	Answer *codec.Answer

	// slots hold the values features keep per request (Slot), nil until
	// the first is set.
	slots *slotCells

	// waiter, when set by the transport, runs the request's waits.
	waiter Waiter

	// query holds Target.Query parsed, once, on first use.
	query       *fasthttp.Args
	queryParsed bool
	upPath      []byte // UpstreamPath's buffer

	owned bool // a transport's (NewOwned): Release leaves it to its owner
}

var ctxPool = sync.Pool{New: func() any { return &Ctx{Scratch: make([]byte, 0, 256)} }}

// Acquire returns a reset Ctx bound to req and resp.
func Acquire(req *fasthttp.Request, resp *fasthttp.Response) *Ctx {
	c := ctxPool.Get().(*Ctx)
	c.Req, c.Resp = req, resp
	return c
}

// NewOwned returns a context for a transport to keep for the requests it
// serves one at a time (a connection's, on the reactor): Release resets it
// and leaves it to its owner instead of the pool.
func NewOwned() *Ctx {
	c := ctxPool.Get().(*Ctx)
	c.owned = true
	return c
}

// AcquireParsed is Acquire for requests built by hand (tools, tests): it
// also fills Target from req, leaving it empty when req's target is
// invalid. Transports use Acquire and let the gateway check the request.
func AcquireParsed(req *fasthttp.Request, resp *fasthttp.Response) *Ctx {
	c := Acquire(req, resp)
	_ = codec.ParseTarget(&c.Target, &req.Header)
	return c
}

// Release resets c and returns it to the pool, or leaves it to its owner
// (NewOwned); c must not be used afterwards. The buffers are kept for the
// next request.
func Release(c *Ctx) {
	// The buffers are set aside and c cleared in place: building the
	// cleared context aside and copying it in moved a kilobyte twice.
	scratch, scratch2, upPath, query := c.Scratch[:0], c.Scratch2[:0], c.upPath[:0], c.query
	target, received, fields, owned := c.Target, c.Received, c.Fields, c.owned
	slots := c.slots
	*c = Ctx{}
	c.Scratch, c.Scratch2, c.upPath, c.query = scratch, scratch2, upPath, query
	c.Target, c.Received, c.Fields, c.owned = target, received, fields, owned
	if slots != nil {
		slots.reset()
		c.slots = slots
	}
	c.Target.Reset()
	c.Received.Reset() // the next request's section may sit where this one's did
	c.Fields.Reset()
	if c.query != nil {
		c.query.Reset()
	}
	if !owned {
		ctxPool.Put(c)
	}
}

// QueryArgs returns the request's query parameters, parsed from
// Target.Query on first use (values decoded, the raw query untouched). The
// Args and its bytes are valid until Release.
func (c *Ctx) QueryArgs() *fasthttp.Args {
	if !c.queryParsed {
		if c.query == nil {
			c.query = new(fasthttp.Args)
		}
		c.query.ParseBytes(c.Target.Query)
		c.queryParsed = true
	}
	return c.query
}

// UpstreamPathBuffer returns an empty buffer for a rewrite to build
// UpstreamPath in; it is reused across requests.
func (c *Ctx) UpstreamPathBuffer() []byte { return c.upPath[:0] }

// SetUpstreamPath sets UpstreamPath to p, keeping p's buffer for reuse when
// it came from UpstreamPathBuffer.
func (c *Ctx) SetUpstreamPath(p []byte) {
	c.UpstreamPath = p
	c.upPath = p[:0]
}

// DropAnswer forgets an answer held as read (Ctx.Answer): c.Resp is the
// answer from here on.
func (c *Ctx) DropAnswer() {
	if c.Answer != nil {
		c.Answer.Reset()
	}
}

// Reject makes the gateway's own answer from a canned error and stops the
// chain. It replaces whatever response was being built.
func (c *Ctx) Reject(e *Canned) Verdict {
	e.WriteTo(c)
	return Stop
}

// Method reports the request method; valid until Release.
func (c *Ctx) Method() []byte { return c.Req.Header.Method() }

// Waiter is how a transport runs the waits of the requests it serves. A
// transport that serves requests on threads of its own (an event loop)
// sets one so that a waiting request can be parked and resumed instead of
// holding the thread; without one, waits block the request's goroutine.
type Waiter interface {
	// Sleep returns after d.
	Sleep(c *Ctx, d time.Duration)
	// Block runs call, a bounded blocking call (a Redis round trip with a
	// deadline), and returns once it has returned. A loop runs it on
	// another goroutine and parks the request meanwhile, so the loop's
	// thread goes on serving the others and never leaves its loop.
	Block(c *Ctx, call BlockingCall)
}

// BlockingCall is a bounded blocking call a filter cannot avoid (the
// nonce claim's Redis round trip, a gRPC call). Run may run on another
// goroutine than the request's, while the request waits: it must not use
// the request's Ctx, only what the call holds.
type BlockingCall interface {
	Run()
}

// BlockingFunc is a function as a BlockingCall.
type BlockingFunc func()

// Run implements BlockingCall.
func (f BlockingFunc) Run() { f() }

// Loop is an event loop of a transport that runs requests on it: it runs
// their waits (Waiter), and it dials upstream connections that it watches
// itself, so a request waiting for its backend holds no thread.
type Loop interface {
	Waiter
	// ID is the loop's index among the transport's loops: small and dense,
	// for pools kept per loop.
	ID() int
	// Dial connects to addr (host:port) within timeout; the connection
	// may be used only by requests running on this loop.
	Dial(addr string, timeout time.Duration) (net.Conn, error)
	// Park parks the request in q until a request on the same loop wakes
	// it (q.WakeOne) or d has passed; it reports whether it was woken.
	Park(q *ParkQueue, d time.Duration) bool
	// Yield lets the loop's other runnable requests run before this one
	// goes on, within the same batch: what several of them write to one
	// connection then leaves in one write.
	Yield()
	// Now is the loop's clock: read once per batch of events, as nginx
	// caches its time, since a clock read costs 25–60 ns and a request
	// takes several (its start and end, its upstream deadlines).
	Now() time.Time
}

// Upgrade is a protocol switch (RFC 9110 §7.8) passed through to the
// backend: the route's limits for the relay, then the backend's side.
type Upgrade struct {
	// Protocol is the Upgrade value asked for ("websocket").
	Protocol string
	// Idle ends the relay when neither side sent anything for this long.
	Idle time.Duration
	// MaxBytes ends it once both directions together carried this many
	// bytes; 0 for no cap.
	MaxBytes int64
	// Conn is the backend's connection once it answered 101, and
	// Buffered what it sent after its answer's header section.
	Conn     net.Conn
	Buffered []byte
}

// Parked is a request parked in a ParkQueue; the loop implements it.
type Parked interface {
	// Unpark makes the loop resume the request once the running one
	// yields.
	Unpark()
}

// ParkQueue is a first-in, first-out line of requests parked on one event
// loop (Loop.Park) until a resource they wait for frees up. It belongs to
// that loop: only requests running on it use it, so it needs no lock.
type ParkQueue struct {
	// waiters[head:] wait, first in line first. The slice's array is
	// kept when the line empties: a queue a call parks in once per
	// request (its answer's) then costs no allocation.
	waiters []Parked
	head    int
}

// Push adds p at the end of the line (for Loop implementations).
func (q *ParkQueue) Push(p Parked) {
	if q.head > 0 && len(q.waiters) == cap(q.waiters) {
		n := copy(q.waiters, q.waiters[q.head:])
		clear(q.waiters[n:])
		q.waiters, q.head = q.waiters[:n], 0
	}
	q.waiters = append(q.waiters, p)
}

// Remove takes p out of the line (a wait that timed out).
func (q *ParkQueue) Remove(p Parked) {
	for i := q.head; i < len(q.waiters); i++ {
		if q.waiters[i] == p {
			last := len(q.waiters) - 1
			copy(q.waiters[i:], q.waiters[i+1:])
			q.waiters[last] = nil
			q.waiters = q.waiters[:last]
			q.reset()
			return
		}
	}
}

// WakeOne wakes the request first in line; it reports false when nobody
// waits.
func (q *ParkQueue) WakeOne() bool {
	if q.head == len(q.waiters) {
		return false
	}
	p := q.waiters[q.head]
	q.waiters[q.head] = nil
	q.head++
	q.reset()
	p.Unpark()
	return true
}

// reset starts an empty line again at the front of its array.
func (q *ParkQueue) reset() {
	if q.head == len(q.waiters) {
		q.waiters, q.head = q.waiters[:0], 0
	}
}

// SetWaiter is for transports: w runs c's waits until Release.
func (c *Ctx) SetWaiter(w Waiter) { c.waiter = w }

// Sleep is the one way a filter or action waits for time to pass (a
// mock's delay): never time.Sleep, which would hold a thread the request
// does not own.
func (c *Ctx) Sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	if c.waiter != nil {
		c.waiter.Sleep(c, d)
		return
	}
	time.Sleep(d)
}

// Stripe is the stripe of per-loop counters the request adds to
// (internal/stripe): its loop's, 0 off a loop.
func (c *Ctx) Stripe() int {
	if c.Loop == nil {
		return 0
	}
	return stripe.Of(c.Loop.ID())
}

// Now is the time for the request's own bookkeeping (its start and end,
// its upstream deadlines and latency): its loop's clock on an event loop,
// the wall clock otherwise.
func (c *Ctx) Now() time.Time {
	if c.Loop != nil {
		return c.Loop.Now()
	}
	return time.Now()
}

// Block runs call, a bounded blocking call the filter cannot avoid (the
// nonce claim's Redis round trip), so that the transport can keep it off a
// thread it must not hold: see Waiter.Block.
func (c *Ctx) Block(call BlockingCall) {
	if c.waiter != nil {
		c.waiter.Block(c, call)
		return
	}
	call.Run()
}

// Observer sees every request the gateway finished, refused ones
// included: counters, metrics, the access log. Observe runs on the
// request's goroutine after the answer is built and must not block or
// keep c. It may read the answer's status and body, not its header
// fields: an upstream's header section may be held as read (c.Answer),
// which a filter that needs it prevents by being a ResponseFilter.
type Observer interface {
	Observe(c *Ctx, end time.Time)
}
