package admin

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/anomaly"
	"github.com/tollgate/tollgate/cluster"
	"github.com/tollgate/tollgate/history"
	"github.com/tollgate/tollgate/observe"
	"go.uber.org/zap"
)

// Ops is what the operations endpoints read: /metrics, /readyz and the
// dashboard.
type Ops struct {
	// Metrics are the gateway's figures (nil: /metrics answers 404 and the
	// dashboard shows no routes).
	Metrics *observe.Metrics
	// Ready reports whether the node should get traffic, and why not
	// (nil: ready).
	Ready func() (ok bool, why string)
	// Cluster returns the Redis client, nil when standalone.
	Cluster func() *cluster.Client
	// Nodes reports how many nodes share the cluster (1 standalone).
	Nodes func() int
	// NodeLoads reads the traffic every node reported with its heartbeat
	// (cluster.Client.NodeLoads); nil when this node has no membership
	// (standalone, or cluster.nodes set to a number): the dashboard's
	// cluster figures are then this node's.
	NodeLoads func(ctx context.Context) ([]cluster.NodeLoad, error)
	// History is this node's traffic by route and hour (GET
	// /admin/history, for tollgate limits suggest); nil without metrics.
	History *history.Local
	// Alerts are the routes' anomaly alerts and Webhook their sender
	// (/metrics, the dashboard); nil without metrics.
	Alerts  *anomaly.Engine
	Webhook *anomaly.Webhook
}

// Paths served without the token even when one is set: what load balancers
// and Prometheus poll.
var openPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// guardAll puts every endpoint but openPaths behind the token when one is
// set, including those registered later by other parts: reads accept the
// token as a bearer token or as the password of HTTP Basic authentication
// (so a browser can open the dashboard); changes take only the bearer
// token, which a browser never sends by itself to another site's form.
// Without a token, reads are open (the listener is loopback, see
// CheckListen) and changes are refused by auth.
func (s *Server) guardAll(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.deps.Token == "" || openPaths[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		read := r.Method == http.MethodGet || r.Method == http.MethodHead
		if s.tokenOK(r, read) {
			next.ServeHTTP(w, r)
			return
		}
		s.refuse(w, r)
	})
}

// tokenOK reports whether r carries the token: as a bearer token, or, when
// basic is true, as a Basic password (any user name).
func (s *Server) tokenOK(r *http.Request, basic bool) bool {
	got := r.Header.Get("Authorization")
	want := []byte(s.deps.Token)
	if v, ok := cutPrefixFold(got, "Bearer "); ok {
		return subtle.ConstantTimeCompare([]byte(v), want) == 1
	}
	if v, ok := cutPrefixFold(got, "Basic "); ok && basic {
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
		if err != nil {
			return false
		}
		_, pass, found := strings.Cut(string(raw), ":")
		return found && subtle.ConstantTimeCompare([]byte(pass), want) == 1
	}
	return false
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return "", false
	}
	return s[len(prefix):], true
}

// refuse answers 401 and counts and logs the failure. Logging is limited
// to one line a second (with the count of those not logged), so a flood of
// bad tokens cannot flood the log.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request) {
	reason := "missing"
	if r.Header.Get("Authorization") != "" {
		reason = "wrong"
	}
	if reason == "missing" {
		s.ops.authMissing.Add(1)
	} else {
		s.ops.authWrong.Add(1)
	}
	now := time.Now().UnixNano()
	last := s.ops.lastAuthLog.Load()
	if now-last >= int64(time.Second) && s.ops.lastAuthLog.CompareAndSwap(last, now) {
		s.log().Warn("admin request refused: missing or wrong token", zap.String("caller", r.RemoteAddr),
			zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.String("token", reason),
			zap.Uint64("not_logged_since_last", s.ops.authUnlogged.Swap(0)))
	} else {
		s.ops.authUnlogged.Add(1)
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="tollgate admin", charset="UTF-8"`)
	fail(w, http.StatusUnauthorized, "missing or wrong token")
}

// opsState is the admin server's own counters.
type opsState struct {
	authMissing, authWrong atomic.Uint64
	authUnlogged           atomic.Uint64
	lastAuthLog            atomic.Int64
	dash                   dashboardCache
}

// ErrPublicWithoutToken is CheckListen's refusal.
var ErrPublicWithoutToken = errors.New("admin: refusing to serve the admin API on a non-loopback address without a token (set admin.token or TOLLGATE_ADMIN_TOKEN, or listen on 127.0.0.1)")

// CheckListen refuses an admin listener reachable from other hosts when no
// token is set: ":9901", "0.0.0.0:9901" or a host's own address would
// hand the gateway's controls, configuration and profiles to its network.
func CheckListen(addr net.Addr, token string) error {
	if token != "" {
		return nil
	}
	if t, ok := addr.(*net.TCPAddr); ok && t.IP.IsLoopback() {
		return nil
	}
	if u, ok := addr.(*net.UnixAddr); ok && u != nil {
		return nil // a socket file: reachable only on this host, by its permissions
	}
	return ErrPublicWithoutToken
}

func (s *Server) registerOps(mux *http.ServeMux) {
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /metrics", s.metrics)
	mux.HandleFunc("GET /dashboard", s.dashboard)
	mux.HandleFunc("GET /admin/live", s.live)
	mux.HandleFunc("GET /admin/history", s.history)
	if m := s.deps.Ops.Metrics; m != nil {
		m.AddSource(s.reportAdmin)
	}
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if f := s.deps.Ops.Ready; f != nil {
		if ok, why := f(); !ok {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(why + "\n"))
			return
		}
	}
	_, _ = w.Write([]byte("ready\n"))
}

func (s *Server) metrics(w http.ResponseWriter, _ *http.Request) {
	m := s.deps.Ops.Metrics
	if m == nil {
		http.NotFound(w, nil)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	m.WritePrometheus(w)
}
