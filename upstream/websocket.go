package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/internal/ascii"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

// WebSocketConfig is a route's `websocket` setting: the route passes
// WebSocket handshakes through (after its filters: auth, limits, ACLs) and
// relays the connection both ways once the backend switches protocols.
//
//	websocket: {idle_timeout: 60s, max_bytes: 0}
type WebSocketConfig struct {
	// IdleTimeout ends a relay in which neither side sent anything for
	// this long; default 60s.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxBytes ends a relay once both directions together carried this
	// many bytes; 0 (default) for no cap.
	MaxBytes int64 `yaml:"max_bytes"`
}

// webSocket marks a WebSocket handshake on a route that allows them.
type webSocket struct {
	idle     time.Duration
	maxBytes int64
}

func init() {
	pipeline.Register(pipeline.Feature{
		Key: "websocket", Stage: pipeline.StageRewrite + 50, Scope: pipeline.ScopeRoute,
		Config: func() any { return new(WebSocketConfig) },
		Build: func(b *pipeline.Build, cfg any) (pipeline.Filter, error) {
			w := cfg.(*WebSocketConfig)
			switch {
			case !b.Route.Forwards:
				return nil, errors.New("websocket applies only to routes that forward")
			case w.IdleTimeout < 0 || w.MaxBytes < 0:
				return nil, errors.New("websocket: idle_timeout and max_bytes cannot be negative")
			}
			if w.IdleTimeout == 0 {
				w.IdleTimeout = 60 * time.Second
			}
			return &webSocket{idle: w.IdleTimeout, maxBytes: w.MaxBytes}, nil
		},
	})
}

var (
	strUpgrade   = []byte("Upgrade")
	strWebSocket = []byte("websocket")
)

// Handle implements pipeline.Filter: a GET asking to upgrade to websocket
// (Upgrade: websocket, Connection naming upgrade) is marked for the
// switch; anything else goes on as an ordinary request (its Upgrade field
// is dropped on the way up, as for every route).
func (w *webSocket) Handle(c *pipeline.Ctx) pipeline.Verdict {
	h := &c.Req.Header
	if !h.IsGet() || !ascii.EqualFold(bytes.TrimSpace(h.PeekBytes(strUpgrade)), "websocket") || !connectionHasUpgrade(h.PeekAll("Connection")) {
		return pipeline.Continue
	}
	c.Upgrade = &pipeline.Upgrade{Protocol: "websocket", Idle: w.idle, MaxBytes: w.maxBytes}
	return pipeline.Continue
}

func connectionHasUpgrade(values [][]byte) bool {
	for _, v := range values {
		for tok := range bytes.SplitSeq(v, []byte(",")) {
			if ascii.EqualFold(bytes.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}

// switchProtocols sends a WebSocket handshake to one instance over a
// connection of its own and, when the backend answers 101, leaves that
// connection in c.Upgrade for the transport to relay; any other answer
// is passed on as it is.
func (s *Service) switchProtocols(c *pipeline.Ctx, deadline time.Time) {
	in := s.current().balancer.Pick(c, nil)
	if in == nil {
		errNoInstance.WriteTo(c)
		c.Outcome.Result = pipeline.ResultNoInstance
		return
	}
	c.Outcome.Instance = in.Addr
	c.Outcome.Attempts++
	in.load[c.Stripe()].requests.Add(1) // in flight only once relayed (relayLoad)
	began := time.Now()
	defer func() { c.Outcome.Latency = time.Since(began) }()
	var conn net.Conn
	var err error
	if c.Loop != nil {
		conn, err = c.Loop.Dial(in.Addr, s.Connect)
	} else {
		conn, err = net.DialTimeout("tcp", in.Addr, s.Connect)
	}
	if err != nil {
		s.exchangeFailed(c, in, err)
		c.Upgrade = nil
		return
	}
	_ = conn.SetDeadline(deadline)
	// The switch is asked for anew: the client's Connection and Upgrade
	// were the client's hop's, dropped by the forwarding step.
	c.Fields.AddString("Connection", strUpgrade)
	c.Fields.AddString("Upgrade", strWebSocket)
	bw := bufio.NewWriter(conn)
	br := bufio.NewReader(conn)
	if err = codec.WriteRequest(bw, c.Req, &c.Fields); err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = c.Resp.Header.Read(br)
	}
	if err != nil {
		_ = conn.Close()
		s.exchangeFailed(c, in, err)
		c.Upgrade = nil
		return
	}
	c.Outcome.Result, c.Outcome.Status = pipeline.ResultOK, c.Resp.StatusCode()
	if c.Resp.StatusCode() != fasthttp.StatusSwitchingProtocols {
		// Refused by the backend: its answer, whole, and no switch. A
		// refusal is short; one longer than the window the gateway holds
		// of any answer is not passed on (it would not stream: the
		// connection is the handshake's own).
		err = c.Resp.ReadBody(br, min(in.pool.MaxResponseBytes, in.pool.AnswerWindow))
		_ = conn.Close()
		c.Upgrade = nil
		if err != nil {
			s.exchangeFailed(c, in, err)
			return
		}
		StripResponse(c.Resp)
		if c.Outcome.Status >= 500 {
			s.failed(in, false)
		} else {
			in.health.ok()
		}
		return
	}
	in.health.ok()
	_ = conn.SetDeadline(time.Time{})
	c.Resp.SkipBody = true
	// The relay is load on the instance for as long as it is open: a
	// least_conn balancer sees it among the instance's requests.
	st := c.Stripe()
	in.load[st].inflight.Add(1)
	c.Upgrade.Conn = &relayLoad{Conn: conn, in: in, stripe: st}
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		c.Upgrade.Buffered = append([]byte(nil), b...)
	}
}

// relayLoad is a switched connection counted in its instance's requests
// in flight until it is closed.
type relayLoad struct {
	net.Conn
	in     *Instance
	stripe int
	once   sync.Once
}

func (r *relayLoad) Close() error {
	r.once.Do(func() { r.in.ended(r.stripe) })
	return r.Conn.Close()
}

// Shutdown ends the relay's pending reads and writes without closing the
// connection (the transport's relay ends with it).
func (r *relayLoad) Shutdown() {
	switch c := r.Conn.(type) {
	case interface{ Shutdown() }:
		c.Shutdown()
	case interface {
		CloseRead() error
		CloseWrite() error
	}:
		_ = c.CloseRead()
		_ = c.CloseWrite()
	}
}
