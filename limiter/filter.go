package limiter

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/cluster"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/source"
	"go.uber.org/zap"
)

// Filter enforces a route's limits list (or the top-level one). It is a
// pipeline.Filter and ResponseFilter, safe for concurrent use; deciding a
// request allocates nothing once its keys have counters (a key's first
// request on a node allocates its cluster entry).
type Filter struct {
	route   string
	rules   []*rule
	headers bool // some rule puts its figures on admitted answers
	now     func() time.Time
}

var (
	hdrLimit      = []byte("X-RateLimit-Limit")
	hdrRemaining  = []byte("X-RateLimit-Remaining")
	hdrReset      = []byte("X-RateLimit-Reset")
	hdrRetryAfter = []byte("Retry-After")
)

// Handle implements pipeline.Filter: every rule must admit the request,
// and a request counts against all of them (a refusal by one rule gives
// back what the rules before it took, so a refused request costs no
// quota). A leaky bucket's delay is waited out once every rule admitted.
func (f *Filter) Handle(c *pipeline.Ctx) pipeline.Verdict {
	now := f.now().UnixNano()
	rd := source.NewReader(c)
	var took [MaxRules]taken
	var delay int64
	var o outcome
	for i, r := range f.rules {
		o = outcome{}
		r.take(c, &rd, now, &o)
		if !o.ok {
			for j := i - 1; j >= 0; j-- {
				f.rules[j].give(c, &took[j], now)
			}
			return r.refuse(c, &o)
		}
		took[i] = o.tk
		delay = max(delay, o.delay)
	}
	for _, r := range f.rules {
		r.counts.allowed.Add(1)
	}
	if delay > 0 {
		for _, r := range f.rules {
			if r.alg == LeakyBucket {
				r.counts.delayed.Add(1)
			}
		}
		c.Sleep(time.Duration(delay))
	}
	return pipeline.Continue
}

// HandleResponse implements pipeline.ResponseFilter: with headers: true,
// an admitted answer carries the most constrained of those rules' figures.
func (f *Filter) HandleResponse(c *pipeline.Ctx) {
	if !f.headers || c.Resp.Header.PeekBytes(hdrRemaining) != nil {
		return
	}
	now := f.now().UnixNano()
	rd := source.NewReader(c)
	found := false
	var limit float64
	var remaining, reset int64
	for _, r := range f.rules {
		if !r.headers {
			continue
		}
		l, rem, rst := r.peek(c, &rd, now)
		if !found || rem < remaining {
			found, limit, remaining, reset = true, l, rem, rst
		}
	}
	if found {
		setRateHeaders(c, limit, remaining, reset, -1)
	}
}

// refuse answers a refusal by r.
func (r *rule) refuse(c *pipeline.Ctx, o *outcome) pipeline.Verdict {
	r.counts.refused.Add(1)
	if o.blocked {
		r.counts.blocked.Add(1)
	}
	if r.challenge != nil {
		r.challenge.WriteTo(c)
		c.Decision = r.decision
	} else {
		canned := r.refusal
		if r.tier {
			if cn, ok := r.byTier[o.tier]; ok {
				canned = cn
			}
		}
		c.Reject(canned)
	}
	setRateHeaders(c, o.limit, 0, o.reset, max(o.retry, 1))
	return pipeline.Stop
}

// setRateHeaders writes the X-RateLimit headers (and Retry-After when
// retry >= 0) without allocating: values are formatted into c.Scratch and
// copied by the header.
func setRateHeaders(c *pipeline.Ctx, limit float64, remaining, reset, retry int64) {
	h := &c.Resp.Header
	b := c.Scratch[:0]
	if limit == math.Trunc(limit) && limit < 1e15 {
		b = strconv.AppendInt(b, int64(limit), 10)
	} else {
		b = strconv.AppendFloat(b, limit, 'f', -1, 64)
	}
	h.SetBytesKV(hdrLimit, b)
	b = strconv.AppendInt(b[:0], max(0, remaining), 10)
	h.SetBytesKV(hdrRemaining, b)
	b = strconv.AppendInt(b[:0], ceilSeconds(reset), 10)
	h.SetBytesKV(hdrReset, b)
	if retry >= 0 {
		b = strconv.AppendInt(b[:0], max(1, ceilSeconds(retry)), 10)
		h.SetBytesKV(hdrRetryAfter, b)
	}
	c.Scratch = b[:0]
}

func ceilSeconds(ns int64) int64 {
	if ns <= 0 {
		return 0
	}
	return (ns + int64(time.Second) - 1) / int64(time.Second)
}

// Build compiles a limits list for b's route (or, with no route, for every
// request). The counters come from b.State: an unchanged rule keeps them
// across reloads. Cluster rules lease tokens through the Redis client in
// the build environment (cluster.EnvKey, or LeaserKey); without one they
// are enforced as the local split.
func Build(b *pipeline.Build, cfgs []Config) (*Filter, error) {
	if len(cfgs) == 0 {
		return nil, nil
	}
	if len(cfgs) > MaxRules {
		return nil, fmt.Errorf("limits: at most %d rules on one route", MaxRules)
	}
	env := environment(b)
	route := b.Route.Name
	if route == "" {
		route = "global"
	}
	f := &Filter{route: route, now: b.Now}
	seen := map[string]int{}
	for i := range cfgs {
		s, err := cfgs[i].validate()
		if err != nil {
			return nil, fmt.Errorf("limits[%d]: %w", i, err)
		}
		if s.name == "" {
			s.name = route + "." + s.dim.text
			switch {
			case s.tier && s.share > 0:
				s.name = route + ".share"
			case s.tier:
				s.name = route + ".tier"
			}
			if seen[s.name]++; seen[s.name] > 1 {
				s.name += "." + strconv.Itoa(seen[s.name])
			}
		} else if seen[s.name]++; seen[s.name] > 1 {
			return nil, fmt.Errorf("limits[%d]: name %q is used twice", i, s.name)
		}
		r, err := env.rule(b, route, s)
		if err != nil {
			return nil, fmt.Errorf("limits[%d]: %w", i, err)
		}
		f.rules = append(f.rules, r)
		f.headers = f.headers || s.headers
	}
	return f, nil
}

// LeaserKey holds the lease client cluster rules use when it is not the
// cluster's own client (cluster.EnvKey): another store's node, such as
// the in-process one the limiter's tests run nodes against.
var LeaserKey = pipeline.NewKey[Leaser]("limiter.leaser")

// env is what rules use from the build environment.
type env struct {
	client Leaser // *cluster.Client, or what LeaserKey holds
	nodes  cluster.Nodes
	quotas *Quotas
	status Statuses
	log    *zap.Logger
}

func environment(b *pipeline.Build) env {
	e := env{nodes: cluster.FixedNodes(1), status: Statuses{LocalLimit: 911, ClusterLimit: 919}, log: b.Logger}
	if e.log == nil {
		e.log = zap.NewNop()
	}
	if cl, ok := cluster.EnvKey.Get(b.Env); ok && cl != nil {
		e.client = redisLeaser{cl}
	}
	if l, ok := LeaserKey.Get(b.Env); ok && l != nil {
		e.client = l
	}
	if n, ok := cluster.NodesEnvKey.Get(b.Env); ok && n != nil {
		e.nodes = n
	}
	if q, ok := quotasKey.Get(b.Env); ok {
		e.quotas = q
	}
	if st, ok := statusKey.Get(b.Env); ok {
		if st.LocalLimit != 0 {
			e.status.LocalLimit = st.LocalLimit
		}
		if st.ClusterLimit != 0 {
			e.status.ClusterLimit = st.ClusterLimit
		}
	}
	return e
}

// localState is a local rule's counters.
type localState struct {
	t *table
	h hasher
}

// clusterState is a cluster rule's entries.
type clusterState struct {
	lr *leaseRules
	h  hasher
}

func newHasher() hasher { return hasher{seed: rand.Uint64()} }

// rule compiles one validated rule, attaching its state.
func (e env) rule(b *pipeline.Build, route string, s *spec) (*rule, error) {
	r := &rule{spec: s, route: route, nodes: e.nodes, quotas: e.quotas}
	if s.tier {
		if e.quotas == nil {
			return nil, fmt.Errorf("a tier quota needs the consumers and tiers sections")
		}
		if _, ok := e.quotas.Tiers["free"]; !ok {
			return nil, fmt.Errorf("a tier quota needs a tier named free (for callers without a tier)")
		}
	}
	digest := s.digest()
	// A tier quota (no share) is one counter per consumer whichever
	// route its requests take; everything else is the route's own.
	stateKey := "limiter|" + route + "|" + s.name + "|" + digest
	redisPrefix := "tollgate:rl:" + digestHex([]byte(route+"|"+s.name+"|"+s.alg.String()), 8) + ":"
	if s.tier && s.share == 0 {
		stateKey = "limiter.tier|" + digest
		redisPrefix = "tollgate:rl:tier." + s.alg.String() + ":"
	}
	r.counts = b.State.Get("limiter.counts|"+route+"|"+s.name+"|"+digest, func() (any, func()) {
		return new(counters), nil
	}).(*counters)
	if s.scope == Cluster && e.client != nil {
		mgrKey := "limiter.leases|" + nodesID(e.nodes)
		r.mgr = b.State.Get(mgrKey, func() (any, func()) {
			m := newManager(e.client, e.nodes, b.Now, e.log)
			if s, ok := e.client.(interface{ Stepped() bool }); !ok || !s.Stepped() {
				m.start() // tests may drive the worker step by step instead
			}
			return m, m.close
		}).(*manager)
		cs := b.State.Get(stateKey+"|"+mgrKey, func() (any, func()) {
			cs := &clusterState{lr: newLeaseRules(r.mgr, s.base, redisPrefix, s.maxKeys), h: newHasher()}
			r.mgr.register(cs.lr)
			return cs, func() { r.mgr.unregister(cs.lr) }
		}).(*clusterState)
		r.lease, r.hash = cs.lr, cs.h
	} else {
		if s.scope == Cluster {
			e.log.Warn("a cluster limit without cluster.redis is enforced by each node at limit ÷ nodes",
				zap.String("route", route), zap.String("rule", s.name))
		}
		ls := b.State.Get(stateKey, func() (any, func()) {
			return &localState{t: newTable(s.maxKeys, s.alg, s.base.Window), h: newHasher()}, nil
		}).(*localState)
		r.local, r.hash = ls.t, ls.h
	}
	status := s.status
	if status == 0 {
		status = e.status.LocalLimit
		if s.scope == Cluster {
			status = e.status.ClusterLimit
		}
	}
	what := "rate limit " + strconv.Quote(s.name) + " exceeded"
	r.refusal = pipeline.NewCanned(status, what)
	if s.tier {
		r.byTier = map[string]*pipeline.Canned{}
		tiers := map[string]bool{"free": true}
		for t := range e.quotas.Tiers {
			tiers[t] = true
		}
		for _, q := range e.quotas.Consumers {
			tiers[q.Tier] = true
		}
		kind := "tier quota"
		if s.share > 0 {
			kind = "API share of the tier quota"
		}
		for t := range tiers {
			r.byTier[t] = pipeline.NewCanned(status, fmt.Sprintf("%s exceeded: %s (tier %s)", kind, s.name, t))
		}
	}
	if a := s.answer; a != nil {
		st := a.Status
		if st == 0 {
			st = 429
		}
		ct := a.ContentType
		if ct == "" {
			ct = "application/json"
		}
		r.challenge = &pipeline.Static{Status: st, ContentType: []byte(ct), Body: []byte(a.Body)}
		for k, v := range a.Headers {
			if strings.ContainsAny(k, "\r\n: ") || strings.ContainsAny(v, "\r\n") {
				return nil, fmt.Errorf("on_reject.headers: %q is not a valid header", k)
			}
			r.challenge.Headers = append(r.challenge.Headers, [2][]byte{[]byte(k), []byte(v)})
		}
		r.decision = what + " (challenge)"
	}
	return r, nil
}

// nodesID names a node count source for state keys.
func nodesID(n cluster.Nodes) string {
	if f, ok := n.(cluster.FixedNodes); ok {
		return "fixed:" + strconv.Itoa(int(f))
	}
	return fmt.Sprintf("members:%p", n)
}
