// Package h2 serves HTTP/2 clients (TLS, ALPN h2) through the gateway's one
// Handler. Each stream becomes the HTTP/1.1 request a transport would have
// parsed — request line, Host from :authority, the fields as sent, a body
// framed by its length — and goes through the same edge checks, routing,
// filters and limits as a request over HTTP/1.1; the answer goes back as
// the stream's HEADERS and DATA.
//
// The framing, HPACK, flow control and stream state are
// golang.org/x/net/http2's server: maintained with Go itself, hardened
// against the 2019 flood family, rapid reset (CVE-2023-44487: handlers
// bounded by the stream limit, a connection that queues too many reset
// streams is closed) and the CONTINUATION flood (CVE-2023-45288: header
// blocks are bounded by the header-list limit while they are read). On top
// of it the gateway cuts a connection whose client resets most of its
// streams before they are answered (Options.MaxEarlyResets), which x/net
// alone allows at the full stream limit forever.
//
// The reactor serves HTTP/2 on its event loops with its own engine, under
// this Server's limits (Limits) and counters (Join, Refused), building each
// request with AppendHead; the x/net server above is fasthttp's, and the
// reactor's with TOLLGATE_H2_ENGINE=xnet.
package h2

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/server/transport"
	"golang.org/x/net/http2"
)

// Options are an HTTP/2 edge's limits, fixed at start.
type Options struct {
	// MaxConcurrentStreams is SETTINGS_MAX_CONCURRENT_STREAMS: streams a
	// client may have open at once on one connection (default 100).
	MaxConcurrentStreams uint32
	// MaxHeaderListBytes bounds a request's header block, decoded, as
	// HTTP/1.1's header section is bounded (default 8 KiB); a larger one,
	// however it is split into CONTINUATION frames, ends the connection.
	MaxHeaderListBytes int
	// StreamWindow and ConnWindow are the flow-control windows the
	// gateway opens for request bodies: per stream and for the whole
	// connection (defaults 256 KiB and 1 MiB). They bound what one
	// connection's bodies hold in memory before the handler reads them.
	StreamWindow int32
	ConnWindow   int32
	// MaxEarlyResets is how many streams a client may reset before they
	// were answered; past it, and past half of its streams, the
	// connection is closed (default 100; rapid reset).
	MaxEarlyResets int
	// MaxBodyBytes is the request body limit (413); StreamBodyBytes the
	// size above which a body is streamed to the backend instead of read
	// whole first (as over HTTP/1.1).
	MaxBodyBytes    int64
	StreamBodyBytes int
	// IdleTimeout closes a connection without open streams; BodyTimeout
	// bounds reading one request's body; WriteTimeout writing one answer.
	IdleTimeout  time.Duration
	BodyTimeout  time.Duration
	WriteTimeout time.Duration
}

// Defaults of Options' zero fields.
const (
	DefaultMaxConcurrentStreams = 100
	DefaultMaxHeaderListBytes   = 8 << 10
	DefaultStreamWindow         = 256 << 10
	DefaultConnWindow           = 1 << 20
	DefaultMaxEarlyResets       = 100
	defaultStreamBodyBytes      = 1 << 20
)

// Server serves HTTP/2 connections; it implements transport.ConnServer.
type Server struct {
	o    Options
	h2   *http2.Server
	base *http.Server // carries the limits x/net reads from net/http's server, and its graceful shutdown

	mu    sync.Mutex
	conns map[*conn]struct{}
	loop  loopConns // served on a transport's event loops (loop.go)
	shut  atomic.Bool

	exchanges sync.Pool // *exchange

	// refused counts, by x/net's name (plus "early_resets"), the protocol
	// errors and floods a stream or connection was refused for.
	refusedMu sync.Mutex
	refused   map[string]int64
}

var _ transport.ConnServer = (*Server)(nil)

// New returns a Server with o's zero fields defaulted.
func New(o Options) *Server {
	if o.MaxConcurrentStreams == 0 {
		o.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if o.MaxHeaderListBytes <= 0 {
		o.MaxHeaderListBytes = DefaultMaxHeaderListBytes
	}
	if o.StreamWindow <= 0 {
		o.StreamWindow = DefaultStreamWindow
	}
	if o.ConnWindow <= 0 {
		o.ConnWindow = DefaultConnWindow
	}
	o.ConnWindow = max(o.ConnWindow, o.StreamWindow)
	if o.MaxEarlyResets <= 0 {
		o.MaxEarlyResets = DefaultMaxEarlyResets
	}
	if o.StreamBodyBytes <= 0 {
		o.StreamBodyBytes = defaultStreamBodyBytes
	}
	s := &Server{o: o, conns: make(map[*conn]struct{}), refused: make(map[string]int64)}
	s.h2 = &http2.Server{
		MaxConcurrentStreams:         o.MaxConcurrentStreams,
		MaxUploadBufferPerStream:     o.StreamWindow,
		MaxUploadBufferPerConnection: o.ConnWindow,
		IdleTimeout:                  o.IdleTimeout,
		CountError:                   s.countRefusal,
	}
	s.base = &http.Server{
		// x/net advertises this (plus room for ten fields' overhead) as
		// SETTINGS_MAX_HEADER_LIST_SIZE and stops decoding past it.
		MaxHeaderBytes: o.MaxHeaderListBytes,
		ReadTimeout:    o.BodyTimeout,
		WriteTimeout:   o.WriteTimeout,
		ErrorLog:       discardLog,
	}
	if err := http2.ConfigureServer(s.base, s.h2); err != nil {
		panic(err) // only for a TLS config it was not given
	}
	s.exchanges.New = func() any { return new(exchange) }
	return s
}

// ServeConn implements transport.ConnServer.
func (s *Server) ServeConn(nc net.Conn, peer netip.AddrPort, h transport.Handler) {
	c := &conn{s: s, nc: nc, peer: peer, h: h}
	s.mu.Lock()
	if s.shut.Load() {
		s.mu.Unlock()
		_ = nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		_ = nc.Close()
	}()
	s.h2.ServeConn(nc, &http2.ServeConnOpts{BaseConfig: s.base, Handler: c})
}

// Shutdown implements transport.ConnServer.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.shut.Swap(true) {
		return s.wait(ctx)
	}
	// net/http's Shutdown runs x/net's graceful shutdown (GOAWAY to every
	// connection, each closing once its streams are answered); it tracks
	// no connection of its own, so it returns at once.
	_ = s.base.Shutdown(ctx)
	s.eachLoopConn(LoopConn.Drain)
	return s.wait(ctx)
}

func (s *Server) wait(ctx context.Context) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for s.Conns() > 0 {
		select {
		case <-ctx.Done():
			s.mu.Lock()
			for c := range s.conns {
				_ = c.nc.Close()
			}
			s.mu.Unlock()
			s.eachLoopConn(LoopConn.Abort)
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// Conns implements transport.ConnServer.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns) + int(s.loop.n.Load())
}

// Stats are the HTTP/2 side's figures for the admin API.
type Stats struct {
	Conns int `json:"conns"`
	// Refused counts streams and connections refused, by reason: x/net's
	// names ("conn_ENHANCE_YOUR_CALM_too_many_early_resets",
	// "authority_host_mismatch", …) and "early_resets" for connections cut
	// by MaxEarlyResets.
	Refused map[string]int64 `json:"refused"`
}

// Stats reports the connections served and what was refused.
func (s *Server) Stats() Stats {
	st := Stats{Conns: s.Conns(), Refused: make(map[string]int64)}
	s.refusedMu.Lock()
	for k, v := range s.refused {
		st.Refused[k] = v
	}
	s.refusedMu.Unlock()
	return st
}

func (s *Server) countRefusal(kind string) {
	s.refusedMu.Lock()
	s.refused[kind]++
	s.refusedMu.Unlock()
}

// conn is one client connection: the http.Handler its streams run on.
type conn struct {
	s    *Server
	nc   net.Conn
	peer netip.AddrPort
	h    transport.Handler

	streams atomic.Int64 // streams whose handler ran
	resets  atomic.Int64 // of those, reset by the client before the answer
	closed  atomic.Bool
}

// earlyReset counts a stream the client reset before it was answered and
// closes the connection once resets are both many and most of its
// streams: a browser cancelling a few fetches stays, a flood does not.
func (c *conn) earlyReset() {
	n := c.resets.Add(1)
	if n <= int64(c.s.o.MaxEarlyResets) || 2*n <= c.streams.Load() {
		return
	}
	if !c.closed.Swap(true) {
		c.s.countRefusal("early_resets")
		_ = c.nc.Close()
	}
}
