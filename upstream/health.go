package upstream

import (
	"cmp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
)

// Health is how a service watches its instances (the `health` setting):
// passive ejection after EjectAfter consecutive failures (or at once when
// the instance refuses connections), then active probes of the ejected
// instance on Path every Interval; HealthyAfter good probes in a row put
// it back. An instance ejected again soon after coming back stays out
// longer each time (Interval, 2×, 4×, … up to 16×) before it is probed.
type Health struct {
	Path         string        `yaml:"path"`          // default "/"
	Interval     time.Duration `yaml:"interval"`      // default 30s
	Timeout      time.Duration `yaml:"timeout"`       // default 1s
	EjectAfter   int           `yaml:"eject_after"`   // default 5
	HealthyAfter int           `yaml:"healthy_after"` // default 2
}

func (h Health) withDefaults() Health {
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Interval <= 0 {
		h.Interval = 30 * time.Second
	}
	if h.Timeout <= 0 {
		h.Timeout = time.Second
	}
	if h.EjectAfter <= 0 {
		h.EjectAfter = 5
	}
	if h.HealthyAfter <= 0 {
		h.HealthyAfter = 2
	}
	return h
}

// health is an instance's health state; it lives as long as the instance
// (across reloads).
type health struct {
	cfg     Health
	log     *zap.Logger
	ejected atomic.Bool
	// failures counts consecutive failures (refused, reset, timeout, 5xx).
	failures atomic.Int64
	// streak counts ejections that followed each other without a stable
	// minute in between; it sets how long the next ejection lasts.
	streak    atomic.Int32
	ejectedAt atomic.Int64 // unix ns
	backAt    atomic.Int64 // unix ns of the last recovery
	nextProbe atomic.Int64 // unix ns
	ejections atomic.Uint64
	recovered atomic.Uint64
	kept      atomic.Uint64 // ejections declined: it was the last healthy instance

	mu      sync.Mutex
	probing bool
	stop    chan struct{}
}

func newHealth(cfg Health, log *zap.Logger) *health {
	if log == nil {
		log = zap.NewNop()
	}
	return &health{cfg: cfg.withDefaults(), log: log, stop: make(chan struct{})}
}

// failed counts a failure and reports whether the instance should now be
// ejected (the service decides, so the last healthy one is kept).
func (h *health) failed(refused bool) bool {
	n := h.failures.Add(1)
	return !h.ejected.Load() && (refused || n >= int64(h.cfg.EjectAfter))
}

func (h *health) ok() {
	if h.failures.Load() != 0 {
		h.failures.Store(0)
	}
}

// eject takes the instance out of rotation and starts probing it.
func (in *Instance) eject(service string, now time.Time) {
	h := in.health
	if !h.ejected.CompareAndSwap(false, true) {
		return
	}
	streak := h.streak.Load()
	if back := h.backAt.Load(); back == 0 || now.UnixNano()-back > int64(time.Minute) {
		streak = 0
	}
	streak = min(streak+1, 5)
	h.streak.Store(streak)
	out := h.cfg.Interval << (streak - 1) // 1×, 2×, 4×, 8×, 16×
	h.ejectedAt.Store(now.UnixNano())
	h.nextProbe.Store(now.Add(out).UnixNano())
	h.ejections.Add(1)
	h.log.Warn("ALERT upstream instance ejected", zap.String("service", service), zap.String("instance", in.Addr),
		zap.Int64("consecutive_failures", h.failures.Load()), zap.Duration("first_probe_in", out))
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.probing {
		h.probing = true
		go in.probeLoop(service)
	}
}

// keep records that an ejection was declined because the instance is the
// service's last healthy one.
func (in *Instance) keep(service string) {
	if in.health.kept.Add(1) == 1 || in.health.kept.Load()%1000 == 0 {
		in.health.log.Error("ALERT upstream instance failing but kept: it is the service's last healthy instance",
			zap.String("service", service), zap.String("instance", in.Addr), zap.Uint64("times", in.health.kept.Load()))
	}
}

// probeLoop probes the ejected instance until it answers HealthyAfter
// times in a row, or the instance is closed.
func (in *Instance) probeLoop(service string) {
	h := in.health
	defer func() {
		h.mu.Lock()
		h.probing = false
		h.mu.Unlock()
	}()
	client := &fasthttp.HostClient{Addr: in.Addr, MaxConns: 1, ReadTimeout: h.cfg.Timeout, WriteTimeout: h.cfg.Timeout,
		NoDefaultUserAgentHeader: true}
	defer client.CloseIdleConnections()
	good := 0
	for {
		wait := time.Until(time.Unix(0, h.nextProbe.Load()))
		if wait < 0 {
			wait = 0
		}
		t := time.NewTimer(wait)
		select {
		case <-h.stop:
			t.Stop()
			return
		case <-t.C:
		}
		if in.probe(client) {
			good++
		} else {
			good = 0
		}
		if good >= h.cfg.HealthyAfter {
			h.failures.Store(0)
			h.backAt.Store(time.Now().UnixNano())
			h.ejected.Store(false)
			h.recovered.Add(1)
			h.log.Warn("upstream instance back in rotation", zap.String("service", service), zap.String("instance", in.Addr),
				zap.Duration("out_for", time.Since(time.Unix(0, h.ejectedAt.Load()))))
			return
		}
		h.nextProbe.Store(time.Now().Add(h.cfg.Interval).UnixNano())
	}
}

// probe sends one health request; any answer below 500 is healthy. An
// instance called over gRPC is probed over gRPC instead (probeGRPC), a
// Dubbo provider with a heartbeat.
func (in *Instance) probe(client *fasthttp.HostClient) bool {
	if cc := in.grpcProbeConn(); cc != nil {
		return in.probeGRPC(cc)
	}
	if d := in.dubboProbe(); d != nil {
		return d.Ping(in.health.cfg.Timeout) == nil
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(in.health.cfg.Path)
	req.Header.SetHost(in.Addr)
	req.Header.Set("User-Agent", "tollgate-health")
	if err := client.DoTimeout(req, resp, in.health.cfg.Timeout); err != nil {
		return false
	}
	return resp.StatusCode() < 500
}

// InstanceStatus is an instance's state for operators.
type InstanceStatus struct {
	Addr      string    `json:"addr"`
	Weight    int       `json:"weight"`
	State     string    `json:"state"` // up | ejected | disabled
	InFlight  int64     `json:"in_flight"`
	Conns     int       `json:"conns"` // open connections, idle and busy
	Requests  uint64    `json:"requests"`
	Errors    uint64    `json:"errors"`
	Failures  int64     `json:"consecutive_failures"`
	Ejections uint64    `json:"ejections"`
	Recovered uint64    `json:"recoveries"`
	Kept      uint64    `json:"kept_as_last_healthy"`
	NextProbe time.Time `json:"next_probe,omitzero"`
	// IdleLearned is how long the event loops' pools let a connection sit
	// idle and still use it, learned from the backend's own closes ("" when
	// nothing is learned: idle_conn, or the backend's announced timeout).
	IdleLearned string `json:"idle_conn_learned,omitempty"`
	// Source is where the instance came from: "file", or the registry
	// watch that listed it ("etcd /services/orders/"); Meta is what the
	// registry says of it.
	Source string            `json:"source"`
	Meta   map[string]string `json:"meta,omitempty"`
}

// Status reports the instance's state.
func (in *Instance) Status() InstanceStatus {
	h := in.health
	requests, errors := in.Stats()
	s := InstanceStatus{Addr: in.Addr, Weight: in.Weight, State: "up", InFlight: in.InFlight(),
		Conns: in.conns(), Requests: requests, Errors: errors, Failures: h.failures.Load(),
		Ejections: h.ejections.Load(), Recovered: h.recovered.Load(), Kept: h.kept.Load(),
		Source: cmp.Or(in.Source, "file"), Meta: in.Meta}
	if d := in.idle.get(time.Now()); d > 0 {
		s.IdleLearned = d.String()
	}
	switch {
	case in.disabled.Load():
		s.State = "disabled"
	case h.ejected.Load():
		s.State = "ejected"
		s.NextProbe = time.Unix(0, h.nextProbe.Load())
	}
	return s
}
