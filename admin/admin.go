// Package admin serves the operators' listener: configuration version and
// reload, counters, and health. It binds to loopback by default and every
// request that changes something needs the bearer token.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/upstream"
	"go.uber.org/zap"
)

// Deps is what the admin API reads and drives.
type Deps struct {
	Token    string
	Snapshot func() *config.Snapshot
	// Reload re-reads the configuration and swaps it in; it returns the new
	// snapshot or why nothing changed.
	Reload func() (*config.Snapshot, error)
	// Stats returns a JSON-encodable view of the gateway's counters.
	Stats func() any
	// Revoke adds "jti:<id>" or "sub:<subject>" to the JWT revocation set
	// for ttl; nil when there is no cluster to hold it.
	Revoke func(member string, ttl time.Duration) error
	// Logger records operators' changes (nil: not logged).
	Logger *zap.Logger
	// Limits returns a JSON-encodable view of the rate-limit rules (GET
	// /admin/limits); nil: the endpoint answers an empty list.
	Limits func() any
	// Ops feeds /metrics, /readyz and the dashboard (see ops.go).
	Ops Ops
	// Listen (the configured listen address) and Hosts (admin.hosts) are
	// the names a request's Host may give besides loopback and the
	// address it arrived on (see host.go).
	Listen string
	Hosts  []string
}

// Server is the admin HTTP listener.
type Server struct {
	deps  Deps
	http  *http.Server
	prot  protection
	ops   opsState
	hosts hostNames
}

// New builds the admin server; Serve starts it.
func New(d Deps) *Server {
	s := &Server{deps: d, hosts: newHostNames(d.Listen, d.Hosts)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /admin/config", s.config)
	mux.HandleFunc("POST /admin/reload", s.auth(s.reload))
	mux.HandleFunc("GET /admin/stats", s.stats)
	mux.HandleFunc("POST /admin/revoke", s.auth(s.revoke))
	s.registerProtection(mux)
	s.registerRecording(mux)
	mux.HandleFunc("GET /admin/limits", s.auth(s.limits))
	// Profiles are served on the admin listener only (loopback by default);
	// with a token configured they need it, as they cost CPU to take.
	mux.HandleFunc("GET /debug/pprof/", s.guardProfile(pprof.Index))
	mux.HandleFunc("GET /debug/pprof/profile", s.guardProfile(pprof.Profile))
	mux.HandleFunc("GET /debug/pprof/trace", s.guardProfile(pprof.Trace))
	mux.HandleFunc("GET /debug/goroutines", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(strconv.Itoa(runtime.NumGoroutine()) + "\n"))
	})
	s.registerOps(mux)
	// With a token set, every endpoint but /healthz, /readyz and /metrics
	// needs it (guardAll); changes need it always (auth). Before either,
	// the Host must name the listener (guardHost), on every endpoint.
	s.http = &http.Server{Handler: s.guardHost(s.guardAll(mux)), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 60 * time.Second}
	return s
}

// Serve serves on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	if err := s.http.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops the listener gracefully.
func (s *Server) Shutdown(ctx context.Context) error { return s.http.Shutdown(ctx) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"code": status, "message": msg})
}

// auth guards changing endpoints: without a configured token they are off,
// since a loopback listener is not a reason to let any local process drive
// the gateway.
func (s *Server) auth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.deps.Token == "" {
			fail(w, http.StatusForbidden, "admin token not configured (admin.token or TOLLGATE_ADMIN_TOKEN)")
			return
		}
		if !s.tokenOK(r, r.Method == http.MethodGet || r.Method == http.MethodHead) {
			s.refuse(w, r)
			return
		}
		next(w, r)
	}
}

func (s *Server) guardProfile(next http.HandlerFunc) http.HandlerFunc {
	if s.deps.Token == "" {
		return next
	}
	return s.auth(next)
}

func snapshotView(s *config.Snapshot) map[string]any {
	routes := make([]string, 0, len(s.Routes))
	for _, r := range s.Routes {
		routes = append(routes, r.Name)
	}
	byName := upstream.ServicesOf(s.Env())
	services := make([]string, 0, len(byName))
	for name := range byName {
		services = append(services, name)
	}
	return map[string]any{
		"version":  s.Version,
		"source":   s.Source,
		"loaded":   s.Loaded.UTC().Format(time.RFC3339Nano),
		"node_id":  s.File.NodeID,
		"routes":   routes,
		"services": services,
	}
}

func (s *Server) config(w http.ResponseWriter, _ *http.Request) {
	snap := s.deps.Snapshot()
	v := snapshotView(snap)
	v["effective"] = maskedConfig(snap.File) // secrets masked
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) reload(w http.ResponseWriter, _ *http.Request) {
	snap, err := s.deps.Reload()
	if err != nil {
		cur := s.deps.Snapshot()
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
			"code": http.StatusUnprocessableEntity, "message": "reload refused: " + err.Error(), "version": cur.Version,
		})
		return
	}
	writeJSON(w, http.StatusOK, snapshotView(snap))
}

// maxRevokeID is the longest jti or sub worth revoking: no longer one fits
// in a token the gateway accepts (16 KiB, see package auth).
const maxRevokeID = 16 << 10

// maxRevokeBody bounds the revoke request: the longest id, written with
// JSON escapes (up to 6 bytes a byte), and room to spare.
const maxRevokeBody = 8 * maxRevokeID

// revoke takes {"jti": "...", "sub": "...", "ttl": "24h"} (one of jti or
// sub; ttl defaults to 24h and should outlive the tokens it revokes). The
// member stored is "jti:" or "sub:" and the id whole, whatever its length,
// as the JWT filter looks it up.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	if s.deps.Revoke == nil {
		fail(w, http.StatusConflict, "revocations need cluster.redis")
		return
	}
	var body struct {
		JTI string `json:"jti"`
		Sub string `json:"sub"`
		TTL string `json:"ttl"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRevokeBody)).Decode(&body); err != nil {
		fail(w, http.StatusBadRequest, "body must be JSON: {\"jti\"|\"sub\": ..., \"ttl\": \"24h\"}")
		return
	}
	if len(body.JTI) > maxRevokeID || len(body.Sub) > maxRevokeID {
		fail(w, http.StatusBadRequest, "jti or sub longer than any token can carry ("+strconv.Itoa(maxRevokeID)+" bytes)")
		return
	}
	ttl := 24 * time.Hour
	if body.TTL != "" {
		d, err := time.ParseDuration(body.TTL)
		if err != nil || d <= 0 {
			fail(w, http.StatusBadRequest, "ttl must be a positive duration such as 24h")
			return
		}
		ttl = d
	}
	var member string
	switch {
	case body.JTI != "" && body.Sub == "":
		member = "jti:" + body.JTI
	case body.Sub != "" && body.JTI == "":
		member = "sub:" + body.Sub
	default:
		fail(w, http.StatusBadRequest, "give exactly one of jti or sub")
		return
	}
	if err := s.deps.Revoke(member, ttl); err != nil {
		fail(w, http.StatusServiceUnavailable, "revocation not stored: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"revoked": member, "ttl": ttl.String()})
}

func (s *Server) stats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.deps.Stats())
}
