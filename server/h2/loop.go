package h2

import (
	"sync/atomic"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"
)

// A transport with event loops serves HTTP/2 on them itself (the reactor's
// engine) with this Server's limits, counting its connections and
// refusals here, so that Stats, Conns and Shutdown cover both.

// LoopConn is an HTTP/2 connection a transport's event loop serves.
type LoopConn interface {
	// Drain sends GOAWAY and closes the connection once its streams are
	// answered; Abort closes it now. Both may be called from any
	// goroutine.
	Drain()
	Abort()
}

// loopConns are the connections served on event loops.
type loopConns struct {
	n   atomic.Int64
	set map[LoopConn]struct{} // under Server.mu
}

// Limits returns the Server's options, defaults applied.
func (s *Server) Limits() Options { return s.o }

// Join counts c among the Server's connections; it reports false when the
// Server is shutting down (c is then refused).
func (s *Server) Join(c LoopConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shut.Load() {
		return false
	}
	if s.loop.set == nil {
		s.loop.set = make(map[LoopConn]struct{})
	}
	s.loop.set[c] = struct{}{}
	s.loop.n.Add(1)
	return true
}

// Leave takes c out of the Server's connections.
func (s *Server) Leave(c LoopConn) {
	s.mu.Lock()
	if _, ok := s.loop.set[c]; ok {
		delete(s.loop.set, c)
		s.loop.n.Add(-1)
	}
	s.mu.Unlock()
}

// each calls fn with every loop connection (shutdown).
func (s *Server) eachLoopConn(fn func(LoopConn)) {
	s.mu.Lock()
	conns := make([]LoopConn, 0, len(s.loop.set))
	for c := range s.loop.set {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		fn(c)
	}
}

// Refused counts a refusal by the name x/net gives it: kind "conn" or
// "stream", the error code, and what happened ("conn_ENHANCE_YOUR_CALM_
// too_many_early_resets"), or a bare name of the gateway's own
// ("early_resets").
func (s *Server) Refused(kind string, code http2.ErrCode, what string) {
	if kind == "" {
		s.countRefusal(what)
		return
	}
	s.countRefusal(kind + "_" + code.String() + "_" + what)
}

// GRPCError makes resp, an answer to a gRPC call that is not gRPC's (the
// gateway's own refusal), the gRPC error a client reads; it reports
// whether it did.
func GRPCError(resp *fasthttp.Response) bool {
	if isGRPCAnswer(resp) {
		return false
	}
	grpcify(resp)
	return true
}
