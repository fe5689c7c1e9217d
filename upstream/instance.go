// Package upstream owns the backends: services, their instances and pooled
// keep-alive connections, the balancers that choose between instances, and
// forwarding a request with timeouts and a retry.
package upstream

import (
	"cmp"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/internal/stripe"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
)

// Pool is how an instance's connections are kept. Zero fields take the
// defaults noted beside them.
type Pool struct {
	Connect time.Duration // dial timeout; default 1s
	Read    time.Duration // whole-response read timeout; default 3s
	Write   time.Duration // request write timeout; default = Read
	// IdleConn is the longest an idle pooled connection is kept. The pools
	// keep one less when the backend announces a shorter keep-alive
	// timeout or is seen closing idle connections sooner; 0 leaves it to
	// them, up to 60 s (autoIdleConn).
	IdleConn time.Duration
	// MaxConns bounds connections per instance (per instance and event
	// loop for requests served on the netpoll transport's loops); default
	// 1024.
	MaxConns int
	// MaxConnWait is how long a request waits for a free connection when
	// MaxConns is reached before it fails; default 20ms.
	MaxConnWait time.Duration
	// MaxResponseBytes bounds a response body; default 64 MiB.
	MaxResponseBytes int
	// AnswerWindow is the most of a response body held in memory: a
	// longer one is read from the backend only as the client takes it
	// (answerBody); default DefaultAnswerWindow.
	AnswerWindow int
	// StreamResponse streams response bodies instead of buffering them.
	StreamResponse bool
}

func (p Pool) withDefaults() Pool {
	if p.Connect <= 0 {
		p.Connect = time.Second
	}
	if p.Read <= 0 {
		p.Read = 3 * time.Second
	}
	if p.Write <= 0 {
		p.Write = p.Read
	}
	if p.IdleConn < 0 {
		p.IdleConn = 0 // the pools' choice
	}
	if p.MaxConns <= 0 {
		p.MaxConns = 1024
	}
	if p.MaxConnWait <= 0 {
		p.MaxConnWait = 20 * time.Millisecond
	}
	if p.MaxResponseBytes <= 0 {
		p.MaxResponseBytes = 64 << 20
	}
	if p.AnswerWindow <= 0 {
		p.AnswerWindow = DefaultAnswerWindow
	}
	return p
}

// Instance is one backend address with its connection pool and the passive
// health the gateway keeps for it. It is shared by every config snapshot
// that names the same address and pool settings (see SharedInstance), so its
// pooled connections and counters survive a reload.
type Instance struct {
	Addr   string
	Weight int
	// Meta is what the registry says of a discovered instance (a
	// split selects by it); Source names the registry watch it came
	// from, "" for an instance written in the file.
	Meta   map[string]string
	Source string

	pool   Pool
	client *fasthttp.HostClient
	// loops are the pools of requests running on event loops, by loop ID,
	// made on first use.
	loops [maxLoopPools]atomic.Pointer[loopPool]

	// grpc are the instance's gRPC connections (services with protocol
	// grpc), made on first use.
	grpc grpcConns
	// grpcLoops are the h2c connections the requests of each event loop
	// make their gRPC calls on (grpcloop.go), by loop ID.
	grpcLoops [maxLoopPools]atomic.Pointer[grpcLoopConn]
	// grpcOnLoops is set once a call was made on a loop: its health is
	// probed over gRPC then, as for calls through grpc-go.
	grpcOnLoops atomic.Bool
	// dubbo is the instance's Dubbo connection (protocol dubbo).
	dubbo dubboConn

	// idle is what the pools have seen of how long the backend keeps an
	// idle connection; keeping is how fasthttp's clients keep to it.
	idle    idleLearner
	keeping idleKeeping

	// disabled is the operator's switch; a disabled instance gets nothing.
	disabled atomic.Bool
	health   *health
	closed   sync.Once

	// load counts requests in one cell per loop stripe (every request
	// writes it; the fields above are read by every pick).
	_    stripe.Pad
	load [stripe.N]instanceLoad
}

// instanceLoad is one stripe's share of an instance's counters.
type instanceLoad struct {
	requests atomic.Uint64
	errors   atomic.Uint64 // connection-level failures
	inflight atomic.Int64
	_        stripe.Pad
}

// began counts a request sent to the instance from stripe st; ended
// (same stripe) counts it done.
func (in *Instance) began(st int) {
	l := &in.load[st&(stripe.N-1)]
	l.requests.Add(1)
	l.inflight.Add(1)
}

func (in *Instance) ended(st int) { in.load[st&(stripe.N-1)].inflight.Add(-1) }

// failedOn counts an exchange that failed at the connection level.
func (in *Instance) failedOn(st int) { in.load[st&(stripe.N-1)].errors.Add(1) }

func newInstance(addr string, weight int, p Pool, h Health, log *zap.Logger) *Instance {
	p = p.withDefaults()
	dialer := &fasthttp.TCPDialer{Concurrency: 0, DNSCacheDuration: time.Minute}
	connect := p.Connect
	in := &Instance{
		Addr:   addr,
		Weight: weight,
		pool:   p,
		health: newHealth(h, log),
	}
	in.keeping = idleKeeping{learned: &in.idle, ceiling: cmp.Or(p.IdleConn, autoIdleConn)}
	in.client = in.newClient(func(a string) (net.Conn, error) {
		c, err := dialer.DialTimeout(a, connect)
		if err != nil {
			return nil, err
		}
		return guard(c, &in.keeping), nil
	})
	return in
}

// newClient returns a connection pool to the instance that dials with dial.
func (in *Instance) newClient(dial fasthttp.DialFunc) *fasthttp.HostClient {
	p := in.pool
	return &fasthttp.HostClient{
		Addr:                in.Addr,
		Dial:                dial,
		MaxConns:            p.MaxConns,
		MaxConnWaitTimeout:  p.MaxConnWait,
		MaxIdleConnDuration: in.keeping.ceiling,
		// Only the pool, its buffers and its dialer are used: the request
		// is written and the answer read by clientExchange (never Do), so
		// fasthttp's timeouts, body limit, retries, path normalizing and
		// default User-Agent do not apply and are not set.
		ReadBufferSize:  8 << 10,
		WriteBufferSize: 8 << 10,
	}
}

// maxLoopPools is how many event loops get a pool of their own per
// instance; requests on loops beyond it share the instance's common pool.
const maxLoopPools = 64

// exchange is one upstream exchange through the pool c's loop (or the
// common pool) provides.
func (in *Instance) exchange(c *pipeline.Ctx, deadline time.Time) error {
	lp := in.loopPoolFor(c.Loop)
	if lp == nil {
		// The shared client cuts the request's write at the write timeout
		// too; a streamed body bounded a moment before that tells a
		// client's delay (408) from a backend that stopped reading (504).
		boundBody(c, sooner(deadline, c.Now(), in.pool.Write))
		return doGuarded(in.client, &in.keeping, c, deadline, &in.pool)
	}
	if !lp.acquire(c, in.pool.MaxConnWait) {
		return fasthttp.ErrNoFreeConns
	}
	streaming, err := lp.do(c, deadline)
	if !streaming {
		lp.release() // else the answer's body holds the slot until it is closed
	}
	return err
}

// loopPoolFor returns the pool of a request running on loop (its
// connections are watched by that loop, so waiting for the backend holds
// no thread), nil for the common one.
func (in *Instance) loopPoolFor(loop pipeline.Loop) *loopPool {
	if loop == nil {
		return nil
	}
	id := loop.ID()
	if id < 0 || id >= maxLoopPools {
		return nil
	}
	if lp := in.loops[id].Load(); lp != nil {
		return lp
	}
	lp := newLoopPool(in, loop)
	if !in.loops[id].CompareAndSwap(nil, lp) {
		return in.loops[id].Load()
	}
	return lp
}

// conns reports the instance's open upstream connections, every pool's.
func (in *Instance) conns() int {
	n := in.client.ConnsCount()
	for i := range in.loops {
		if lp := in.loops[i].Load(); lp != nil {
			n += lp.conns()
		}
	}
	return n
}

// Available reports whether balancers should send new requests here: not
// disabled by an operator, not ejected.
func (in *Instance) Available() bool {
	return !in.disabled.Load() && !in.health.ejected.Load()
}

// SetDisabled is the operator's switch for the instance.
func (in *Instance) SetDisabled(v bool) { in.disabled.Store(v) }

// Disabled reports the operator's switch.
func (in *Instance) Disabled() bool { return in.disabled.Load() }

// InFlight reports requests currently sent to the instance.
func (in *Instance) InFlight() int64 {
	var n int64
	for i := range in.load {
		n += in.load[i].inflight.Load()
	}
	return n
}

// Stats reports requests sent and connection-level errors seen.
func (in *Instance) Stats() (requests, errors uint64) {
	for i := range in.load {
		requests += in.load[i].requests.Load()
		errors += in.load[i].errors.Load()
	}
	return requests, errors
}

// close stops the instance's prober and drops its idle connections;
// in-flight requests finish.
func (in *Instance) close() {
	in.closed.Do(func() { close(in.health.stop) })
	in.closeGRPC()
	in.closeDubbo()
	in.client.CloseIdleConnections()
	for i := range in.loops {
		if lp := in.loops[i].Load(); lp != nil {
			lp.closeIdle(true)
		}
	}
}
