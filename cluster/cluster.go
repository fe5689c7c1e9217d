// Package cluster is the one place Tollgate talks to Redis, and it knows
// Redis, not the features: claims shared by every node (the request
// path's one call, bounded by a budget), scripts that features bring and
// run in pipelined batches, sets and keys read through client-side
// caching, the node membership, and the connection's health. The
// protocols built on them live with their features: replay nonces in
// auth, token leases in limiter, the configuration store in config.
//
// Everything here is bounded so that a slow or dead Redis degrades a
// feature and never stalls a request:
//
//   - Request-path calls (Claim) never wait longer than
//     Options.Budget. The Redis command runs on a bounded pool of worker
//     goroutines; the caller waits for the answer with a timer and gives up
//     when it fires. A call that times out, fails, or finds the pool full
//     returns ErrDegraded and puts the Client in degraded mode.
//   - In degraded mode request-path calls return ErrDegraded at once
//     without touching Redis. One background prober PINGs Redis every
//     Options.ProbeEvery and leaves degraded mode when Redis answers.
//   - Reads that features consult per request (SetView) are served from an
//     immutable in-process snapshot that a background loop refreshes; the
//     loop reads through rueidis client-side caching, so a steady state
//     costs no Redis command, and Redis's invalidation pushes trigger a
//     refresh at once.
//
// New succeeds when Redis is down: the Client starts degraded and connects
// in the background as soon as Redis answers.
package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/zap"
)

// Errors returned by the Client.
var (
	// ErrDegraded means Redis did not answer within the budget, failed, or
	// is known to be unavailable; the caller should use its fallback
	// (standalone behaviour). The Client recovers by itself.
	ErrDegraded = errors.New("cluster: redis unavailable (degraded)")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("cluster: client closed")
	// ErrBadTTL is returned for a zero or negative TTL.
	ErrBadTTL = errors.New("cluster: ttl must be positive")
)

// Defaults for zero Options fields.
const (
	DefaultBudget       = 20 * time.Millisecond
	DefaultMaxInFlight  = 1024
	DefaultProbeEvery   = 250 * time.Millisecond
	DefaultProbeTimeout = 500 * time.Millisecond
	DefaultDialTimeout  = 500 * time.Millisecond
	DefaultConnTimeout  = time.Second
	DefaultCacheTTL     = 30 * time.Second
	DefaultCacheBytes   = 8 << 20
	DefaultRefresh      = 200 * time.Millisecond
)

// Options configures a Client. Zero values mean the documented default.
type Options struct {
	// Addrs are Redis addresses (host:port): one standalone server, or
	// seed nodes of a Redis Cluster (detected automatically). Required.
	Addrs []string
	// Username and Password authenticate (AUTH / ACL). Optional.
	Username string
	Password string
	// TLS, when set, reaches Redis over TLS with these settings.
	TLS *tls.Config
	// NodeID names this gateway node in membership and in CLIENT LIST.
	// Default: hostname-pid. Must not contain spaces.
	NodeID string

	// Budget is the longest a request-path call waits for Redis.
	// Default 20ms.
	Budget time.Duration
	// MaxInFlight bounds the request-path Redis calls running at once (and
	// so the goroutines that can be stuck on a hung Redis). A call that
	// finds all slots taken returns ErrDegraded. Default 1024.
	MaxInFlight int

	// ProbeEvery is how often the prober PINGs while degraded; a healthy
	// Client is checked every 4 × ProbeEvery. Default 250ms.
	ProbeEvery time.Duration
	// ProbeTimeout bounds one probe. Default 500ms. (rueidis may still
	// take up to about a second to give up on a silent connection; that
	// only delays the background prober.)
	ProbeTimeout time.Duration
	// DialTimeout bounds connecting and the connection handshake.
	// Default 500ms.
	DialTimeout time.Duration
	// ConnTimeout is rueidis's ConnWriteTimeout: a connection with a
	// command unanswered for this long is declared dead and closed.
	// Default 1s.
	ConnTimeout time.Duration

	// CacheTTL caps how long a client-side cached read is trusted without
	// an invalidation from Redis. Invalidation pushes keep the cache
	// correct; the TTL is a safety net, and one read per CacheTTL per
	// watched key is the steady-state cost (five commands: CLIENT CACHING,
	// MULTI, the read, PTTL, EXEC), so it is long. Default 30s.
	CacheTTL time.Duration
	// CacheBytes is the client-side cache size per connection.
	// Default 8 MiB.
	CacheBytes int

	// Logger receives one line when entering degraded mode and one when
	// recovering (never per request). Nil: no logs.
	Logger *zap.Logger
}

// withDefaults returns o with zero fields set to their defaults.
func (o Options) withDefaults() Options {
	if o.NodeID == "" {
		host, _ := os.Hostname()
		if host == "" {
			host = "node"
		}
		o.NodeID = host + "-" + strconv.Itoa(os.Getpid())
	}
	if o.Budget == 0 {
		o.Budget = DefaultBudget
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.ProbeEvery == 0 {
		o.ProbeEvery = DefaultProbeEvery
	}
	if o.ProbeTimeout == 0 {
		o.ProbeTimeout = DefaultProbeTimeout
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.ConnTimeout == 0 {
		o.ConnTimeout = DefaultConnTimeout
	}
	if o.CacheTTL == 0 {
		o.CacheTTL = DefaultCacheTTL
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	return o
}

// Validate reports an unusable configuration. It does not contact Redis.
func (o Options) Validate() error {
	if len(o.Addrs) == 0 {
		return errors.New("cluster: no redis address")
	}
	for _, a := range o.Addrs {
		if a == "" {
			return errors.New("cluster: empty redis address")
		}
	}
	if strings.ContainsAny(o.NodeID, " \t\r\n") {
		return fmt.Errorf("cluster: node id %q contains spaces", o.NodeID)
	}
	for name, d := range map[string]time.Duration{
		"budget": o.Budget, "probe interval": o.ProbeEvery, "probe timeout": o.ProbeTimeout,
		"dial timeout": o.DialTimeout, "connection timeout": o.ConnTimeout, "cache ttl": o.CacheTTL,
	} {
		if d < 0 {
			return fmt.Errorf("cluster: negative %s %v", name, d)
		}
	}
	if o.MaxInFlight < 0 || o.CacheBytes < 0 {
		return errors.New("cluster: negative max in flight or cache size")
	}
	return nil
}

// Stats are counters since New. Read them with Client.Stats.
type Stats struct {
	// Healthy is false while degraded.
	Healthy bool
	// ClaimLatency and ScriptLatency are the durations of the claims
	// (Claim) and of the script batches (RunScripts) that got an answer
	// (or an error) from Redis.
	ClaimLatency, ScriptLatency Latency
	// Degraded counts transitions into degraded mode, Recovered the way
	// back.
	Degraded  uint64
	Recovered uint64
	// Refused counts request-path calls answered ErrDegraded without an
	// answer from Redis because the Client was degraded, or became
	// degraded (another call timed out) while they waited.
	Refused uint64
	// Timeouts counts request-path calls that ran out of Budget.
	Timeouts uint64
	// Saturated counts request-path calls refused because MaxInFlight
	// calls were already pending.
	Saturated uint64
	// Errors counts request-path calls that failed within the budget
	// (connection or Redis error).
	Errors uint64
	// InFlight is the number of request-path Redis calls running now,
	// including ones whose callers already gave up.
	InFlight int
	// Backfilled counts claims decided while degraded and written to
	// Redis after recovery; BackfillDropped those the backlog had no room
	// for.
	Backfilled, BackfillDropped uint64
	// Scripts counts script commands sent (RunScripts: EVALSHA, and EVAL
	// for a server without the script).
	Scripts uint64
}

// Client is a bounded, self-healing Redis client. It is safe for
// concurrent use. Create it with New and stop it with Close.
type Client struct {
	o   Options
	ro  rueidis.ClientOption
	log *zap.Logger

	claimLat, scriptLat latency

	// rc holds the rueidis client once connected; nil until then.
	rc       atomic.Pointer[rcBox]
	degraded atomic.Bool
	since    atomic.Int64 // unix nanos of the last transition into degraded
	answered atomic.Int64 // unix nanos of the last background call Redis answered
	// down is closed when the Client enters degraded mode, releasing calls
	// still waiting for Redis; recovery installs a fresh one. stateMu
	// serialises the transitions (the request path only reads atomics).
	down    atomic.Pointer[chan struct{}]
	stateMu sync.Mutex
	closed  atomic.Bool

	sem  chan struct{} // request-path slots (MaxInFlight)
	work chan *call    // hands a call to an idle worker

	nDegraded, nRecovered, nRefused, nTimeouts, nSaturated, nErrors atomic.Uint64
	nScripts                                                        atomic.Uint64

	// backlog keeps claims decided while degraded, to be written to
	// Redis after recovery (see Claim).
	backlog                 chan pendingClaim
	nBackfilled, nBackDrops atomic.Uint64

	// mu guards views and orders starting background loops against Close.
	mu    sync.Mutex
	views map[string]*SetView // by Redis key

	member     atomic.Pointer[membership]
	memberHold time.Duration                   // defaultMemberHold; fixed before Heartbeat
	loads      atomic.Pointer[loadSource]      // set by ReportCounts
	status     atomic.Pointer[func() NodeInfo] // set by ReportStatus

	keys keyWatch // KeyChanges

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup // background loops (prober, views, heartbeat)
}

type rcBox struct{ c rueidis.Client }

// New returns a Client for o. It fails only on invalid options: when Redis
// is down the Client starts degraded and connects in the background. New
// tries to connect once before returning, bounded by DialTimeout, so a
// Client created while Redis is up is healthy at once.
func New(o Options) (*Client, error) {
	o = o.withDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	c := &Client{
		o:    o,
		log:  o.Logger,
		sem:  make(chan struct{}, o.MaxInFlight),
		work: make(chan *call),

		backlog: make(chan pendingClaim, backlogSize),
		views:   make(map[string]*SetView),
		stop:    make(chan struct{}),

		memberHold: defaultMemberHold,
	}
	if c.log == nil {
		c.log = zap.NewNop()
	}
	c.ro = rueidis.ClientOption{
		InitAddress: append([]string(nil), o.Addrs...),
		Username:    o.Username,
		Password:    o.Password,
		TLSConfig:   o.TLS,
		ClientName:  "tollgate-" + o.NodeID,
		// Dialer.KeepAlive is also rueidis's idle PING interval.
		Dialer:            net.Dialer{Timeout: o.DialTimeout, KeepAlive: time.Second},
		ConnWriteTimeout:  o.ConnTimeout,
		CacheSizeEachConn: o.CacheBytes,
		// Never retry behind the caller's back: a retried SET NX whose
		// first attempt reached Redis would report a fresh claim as
		// taken, and retries only lengthen stalls.
		DisableRetry:    true,
		OnInvalidations: c.onInvalidations,
		// Bound redirect loops of a misconfigured Redis Cluster.
		ClusterOption: rueidis.ClusterOption{MaxMovedRedirections: 3},
	}
	c.degraded.Store(true) // until connected
	c.since.Store(time.Now().UnixNano())
	closedCh := make(chan struct{})
	close(closedCh)
	c.down.Store(&closedCh)
	if err := c.connect(); err != nil {
		c.nDegraded.Add(1)
		c.log.Warn("redis unavailable at start; running degraded until it answers",
			zap.Strings("addrs", o.Addrs), zap.Error(err))
	} else {
		c.setHealthy()
	}
	c.wg.Add(1)
	go c.probeLoop()
	return c, nil
}

// connect creates the rueidis client if it does not exist yet. rueidis
// needs a live server to create a client, hence the lazy creation.
func (c *Client) connect() error {
	if c.rc.Load() != nil {
		return nil
	}
	rc, err := rueidis.NewClient(c.ro)
	if err != nil {
		return err
	}
	if c.closed.Load() {
		rc.Close()
		return ErrClosed
	}
	c.rc.Store(&rcBox{rc})
	return nil
}

// redis returns the rueidis client, or nil before the first connection.
func (c *Client) redis() rueidis.Client {
	if b := c.rc.Load(); b != nil {
		return b.c
	}
	return nil
}

// Healthy reports whether Redis answered recently (not degraded).
func (c *Client) Healthy() bool { return !c.degraded.Load() && !c.closed.Load() }

// NodeID is this node's identity (Options.NodeID or its default).
func (c *Client) NodeID() string { return c.o.NodeID }

// Stats returns a snapshot of the counters.
func (c *Client) Stats() Stats {
	return Stats{
		Healthy:       c.Healthy(),
		ClaimLatency:  c.claimLat.read(),
		ScriptLatency: c.scriptLat.read(),
		Degraded:      c.nDegraded.Load(),
		Recovered:     c.nRecovered.Load(),
		Refused:       c.nRefused.Load(),
		Timeouts:      c.nTimeouts.Load(),
		Saturated:     c.nSaturated.Load(),
		Errors:        c.nErrors.Load(),
		InFlight:      len(c.sem),

		Backfilled:      c.nBackfilled.Load(),
		BackfillDropped: c.nBackDrops.Load(),
		Scripts:         c.nScripts.Load(),
	}
}

// markDegraded enters degraded mode; only the transition is logged.
func (c *Client) markDegraded(reason string, err error) {
	if c.degraded.Load() {
		return
	}
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	if c.degraded.Load() {
		return
	}
	c.degraded.Store(true)
	close(*c.down.Load())
	c.since.Store(time.Now().UnixNano())
	c.nDegraded.Add(1)
	c.log.Warn("redis degraded: cluster features fall back to local behaviour",
		zap.String("reason", reason), zap.Error(err))
}

// setHealthy leaves degraded mode and reports whether it was degraded. The
// fresh down channel is in place before callers can see the healthy state.
func (c *Client) setHealthy() bool {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	if !c.degraded.Load() {
		return false
	}
	ch := make(chan struct{})
	c.down.Store(&ch)
	c.degraded.Store(false)
	return true
}

func (c *Client) markRecovered() {
	if c.setHealthy() {
		c.nRecovered.Add(1)
		c.log.Info("redis recovered",
			zap.Duration("degraded_for", time.Since(time.Unix(0, c.since.Load()))))
		c.membersRecovered() // before the views refresh: hold the node count, beat now
		c.kickViews()        // refresh every view now rather than on the next tick
		c.wg.Add(1)
		go c.backfill()
	}
}

// probeLoop is the single prober: while degraded it (re)connects and
// PINGs every ProbeEvery and clears degraded mode when Redis answers; while
// healthy it PINGs every 4 × ProbeEvery (unless other calls were answered
// meanwhile) so Healthy stays true to Redis even without traffic.
func (c *Client) probeLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.o.ProbeEvery)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		if c.degraded.Load() {
			if c.probe() == nil {
				c.markRecovered()
			}
		} else if n%4 == 0 && time.Since(time.Unix(0, c.answered.Load())) >= 4*c.o.ProbeEvery {
			// Script batches (leases) and heartbeats that Redis answers
			// prove it as well as a PING: the probe runs only when they
			// fall silent.
			if err := c.probe(); err != nil {
				c.markDegraded("health check failed", err)
			}
		}
	}
}

// probe connects if needed and PINGs once.
func (c *Client) probe() error {
	if err := c.connect(); err != nil {
		return err
	}
	rc := c.redis()
	ctx, cancel := context.WithTimeout(context.Background(), c.o.ProbeTimeout)
	defer cancel()
	return rc.Do(ctx, rc.B().Ping().Build()).Error()
}

// Close stops the background loops, removes this node from membership
// (best effort) and closes the connections. It returns within
// ProbeTimeout + ConnTimeout: against a hung Redis, rueidis needs about a
// second per connection to give up, and that part finishes in the
// background. Calls after Close return ErrClosed.
func (c *Client) Close() {
	c.stopOnce.Do(func() {
		c.mu.Lock() // no loop starts after this (see WatchSet, Heartbeat)
		c.closed.Store(true)
		c.mu.Unlock()
		close(c.stop)
		rc := c.redis()
		if m := c.member.Load(); m != nil && rc != nil && !c.degraded.Load() {
			c.bounded(c.o.ProbeTimeout, func() { c.leave(rc, m.id) })
		}
		c.bounded(c.o.ConnTimeout, func() {
			if rc != nil {
				rc.Close() // also releases loops waiting on Redis
			}
			c.wg.Wait()
			// A probe may have connected while Close ran.
			if rc2 := c.redis(); rc2 != nil && rc2 != rc {
				rc2.Close()
			}
		})
	})
}

// bounded runs f and waits for it at most d; f goes on in the background
// after that.
func (c *Client) bounded(d time.Duration, f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
