package admin

import (
	"encoding/json"
	"github.com/tollgate/tollgate/discovery"
	"net/http"
	"sort"
	"sync/atomic"

	"github.com/tollgate/tollgate/breaker"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/upstream"
	"go.uber.org/zap"
)

// Backend protection endpoints: what the breakers and instances are doing,
// and the operator's hands on them. Every change is logged with the
// caller's address, what changed and the reason given, and counted.

// protection counts the operators' changes.
type protection struct {
	changes atomic.Uint64
}

func (s *Server) registerProtection(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/breakers", s.auth(s.breakers))
	mux.HandleFunc("POST /admin/breakers", s.auth(s.setBreaker))
	mux.HandleFunc("POST /admin/degrade", s.auth(s.setDegrade))
	mux.HandleFunc("GET /admin/instances", s.auth(s.instances))
	mux.HandleFunc("POST /admin/instances", s.auth(s.setInstance))
}

func (s *Server) log() *zap.Logger {
	if s.deps.Logger == nil {
		return zap.NewNop()
	}
	return s.deps.Logger
}

// guard is a route's part that guards it with a breaker operators may
// force open or closed (it shows itself as "breaker").
type guard interface {
	Breaker() *breaker.Breaker
}

// degrader is a route's degraded answer (it shows itself as "degrade").
type degrader interface {
	On() bool
	Served() uint64
}

func (s *Server) breakers(w http.ResponseWriter, _ *http.Request) {
	snap := s.deps.Snapshot()
	routes := map[string]any{}
	snap.Inspectors(func(route string, in pipeline.Inspector) {
		if route == "" {
			return
		}
		in.Inspect(func(kind string, state any) {
			if kind != "breaker" && kind != "degrade" {
				return
			}
			v, _ := routes[route].(map[string]any)
			if v == nil {
				v = map[string]any{}
				routes[route] = v
			}
			v[kind] = state
		})
	})
	services := map[string]any{}
	for name, svc := range upstream.ServicesOf(snap.Env()) {
		if b := svc.Breaker(); b != nil {
			services[name] = b.Status()
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"routes": routes, "services": services, "operator_changes": s.prot.changes.Load()})
}

func (s *Server) instances(w http.ResponseWriter, _ *http.Request) {
	snap := s.deps.Snapshot()
	out := map[string][]upstream.InstanceStatus{}
	discovered := map[string]discovery.Status{}
	for name, svc := range upstream.ServicesOf(snap.Env()) {
		list := []upstream.InstanceStatus{}
		for _, in := range svc.Instances() {
			list = append(list, in.Status())
		}
		sort.Slice(list, func(i, j int) bool { return list[i].Addr < list[j].Addr })
		out[name] = list
		if m := svc.Members(); m != nil {
			discovered[name] = m.Watch().Status()
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"services": out, "discovery": discovered, "operator_changes": s.prot.changes.Load()})
}

// change logs and counts an operator's change.
func (s *Server) change(r *http.Request, what, target, reason string) {
	s.prot.changes.Add(1)
	s.log().Warn("operator change", zap.String("caller", r.RemoteAddr), zap.String("change", what),
		zap.String("target", target), zap.String("reason", reason))
}

const maxChangeBody = 4 << 10

func decodeChange(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxChangeBody)).Decode(v); err != nil {
		fail(w, http.StatusBadRequest, "body must be JSON")
		return false
	}
	return true
}

// setBreaker takes {"route"|"service": NAME, "action": "open"|"close", "reason": "..."}.
func (s *Server) setBreaker(w http.ResponseWriter, r *http.Request) {
	var body struct{ Route, Service, Action, Reason string }
	if !decodeChange(w, r, &body) {
		return
	}
	snap := s.deps.Snapshot()
	var b *breaker.Breaker
	target := ""
	switch {
	case body.Route != "" && body.Service == "":
		part := snap.RoutePart(body.Route, "breaker")
		g, ok := part.(guard)
		if !ok {
			fail(w, http.StatusNotFound, "no route "+body.Route+" with a breaker")
			return
		}
		b, target = g.Breaker(), "route "+body.Route
	case body.Service != "" && body.Route == "":
		svc := upstream.ServicesOf(snap.Env())[body.Service]
		if svc == nil || svc.Breaker() == nil {
			fail(w, http.StatusNotFound, "no service "+body.Service+" with a breaker")
			return
		}
		b, target = svc.Breaker(), "service "+body.Service
	default:
		fail(w, http.StatusBadRequest, "give exactly one of route or service")
		return
	}
	switch body.Action {
	case "open":
		b.ForceOpen()
	case "close":
		b.ForceClose()
	default:
		fail(w, http.StatusBadRequest, "action must be open or close")
		return
	}
	s.change(r, "breaker "+body.Action, target, body.Reason)
	writeJSON(w, http.StatusOK, map[string]any{"target": target, "breaker": b.Status()})
}

// setDegrade takes {"route": NAME, "on": true|false, "reason": "..."}.
func (s *Server) setDegrade(w http.ResponseWriter, r *http.Request) {
	s.setRouteSwitch(w, r, "degrade", "a degrade answer configured", func(route string) pipeline.Switcher {
		part := s.deps.Snapshot().RoutePart(route, "degrade")
		sw, _ := part.(pipeline.Switcher)
		return sw
	})
}

// setRouteSwitch takes {"route": NAME, "on": true|false, "reason": "..."}
// and switches what find returns for the route (nil: the route has none,
// which has names).
func (s *Server) setRouteSwitch(w http.ResponseWriter, r *http.Request, feature, has string, find func(route string) pipeline.Switcher) {
	var body struct {
		Route  string
		On     *bool
		Reason string
	}
	if !decodeChange(w, r, &body) {
		return
	}
	if body.On == nil {
		fail(w, http.StatusBadRequest, "give on: true or false")
		return
	}
	sw := find(body.Route)
	if sw == nil {
		fail(w, http.StatusNotFound, "no route "+body.Route+" with "+has)
		return
	}
	was := sw.Switch(*body.On)
	what := feature + " off"
	if *body.On {
		what = feature + " on"
	}
	s.change(r, what, "route "+body.Route, body.Reason)
	writeJSON(w, http.StatusOK, map[string]any{"route": body.Route, "on": *body.On, "was": was})
}

// setInstance takes {"service": NAME, "addr": "host:port", "enabled": true|false, "reason": "..."}.
func (s *Server) setInstance(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Service, Addr string
		Enabled       *bool
		Reason        string
	}
	if !decodeChange(w, r, &body) {
		return
	}
	if body.Enabled == nil {
		fail(w, http.StatusBadRequest, "give enabled: true or false")
		return
	}
	svc := upstream.ServicesOf(s.deps.Snapshot().Env())[body.Service]
	if svc == nil {
		fail(w, http.StatusNotFound, "no service "+body.Service)
		return
	}
	for _, in := range svc.Instances() {
		if in.Addr == body.Addr {
			in.SetDisabled(!*body.Enabled)
			what := "instance disabled"
			if *body.Enabled {
				what = "instance enabled"
			}
			s.change(r, what, body.Service+" "+body.Addr, body.Reason)
			writeJSON(w, http.StatusOK, in.Status())
			return
		}
	}
	fail(w, http.StatusNotFound, "service "+body.Service+" has no instance "+body.Addr)
}
