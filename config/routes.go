package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/route"
	"github.com/tollgate/tollgate/route/expr"
	"github.com/tollgate/tollgate/source"
)

// forwardChain is the chain of a route that only forwards to service.
func (s *Snapshot) forwardChain(service string) *pipeline.Chain {
	return pipeline.NewChain(s.upstreams.Action(service, nil), s.upstreams.Forwarding(nil))
}

// compileRoute turns one configured route into its table entry and chain:
// the registered features it sets and the steps every route has (split,
// forwarding), ordered by stage (pipeline.Stage); then the action.
func (s *Snapshot) compileRoute(rc *Route, order int) (*route.Route, error) {
	m := rc.Match
	r := &route.Route{Name: rc.Name, Priority: rc.Priority, Host: m.Host, Methods: m.Methods, Order: order}
	switch {
	case countSet(m.Path, m.Prefix, m.Regex) != 1:
		return nil, errors.New("match needs exactly one of path, prefix or regex")
	case m.Path != "":
		r.Path, r.Kind = m.Path, route.Exact
	case m.Prefix != "":
		r.Path, r.Kind = m.Prefix, route.Prefix
	default:
		r.Path, r.Kind = m.Regex, route.Regex
	}
	for _, meth := range m.Methods {
		if meth != strings.ToUpper(meth) || meth == "" {
			return nil, fmt.Errorf("match.methods: %q must be an upper-case method", meth)
		}
	}
	if m.When != "" {
		cond, err := expr.Compile(m.When)
		if err != nil {
			var se *expr.SyntaxError
			if errors.As(err, &se) && rc.WhenLine > 0 {
				return nil, &Error{Line: rc.WhenLine, Col: rc.WhenCol + se.Pos,
					Msg: fmt.Sprintf("route %q: match.when: %v", rc.Name, err)}
			}
			return nil, fmt.Errorf("match.when: %v", err)
		}
		r.When = cond
	}

	actions := countSet(rc.Service, boolStr(len(rc.Split) > 0), boolStr(rc.Mock != nil), boolStr(rc.Offline != nil))
	if actions != 1 {
		return nil, errors.New("needs exactly one of service, split, mock or offline")
	}
	forwards := rc.Service != "" || len(rc.Split) > 0
	info := pipeline.RouteInfo{Name: rc.Name, Forwards: forwards, Service: rc.Service}
	if r.Kind == route.Prefix {
		info.Prefix = r.Path
	}
	filters, err := buildFeatures(&pipeline.Build{Env: s.env, Route: info}, rc.Features, pipeline.ScopeRoute)
	if err != nil {
		return nil, err
	}

	// The steps every route has are placed among the features by stage.
	if rc.SplitForce != nil && len(rc.Split) == 0 {
		return nil, errors.New("split_force needs split")
	}
	var split *route.Split
	if len(rc.Split) > 0 {
		if split, err = s.compileSplit(rc); err != nil {
			return nil, err
		}
		// The split decides before forwarding rewrites the headers.
		filters = append(filters, staged{pipeline.StageChoose, "split", split})
	}
	policy, err := headerPolicy(rc)
	if err != nil {
		return nil, err
	}
	if policy != nil && !forwards {
		return nil, errors.New("headers, forward_authorization and forward_cookies apply only to routes that forward")
	}
	if forwards {
		// Last: it builds the upstream request from everything before it.
		filters = append(filters, staged{pipeline.StageForward, "forward", s.upstreams.Forwarding(policy)})
	}

	if err := s.checkProtocols(rc); err != nil {
		return nil, err
	}
	var action pipeline.Action
	switch {
	case rc.Service != "":
		if action = s.upstreams.Action(rc.Service, nil); action == nil {
			return nil, fmt.Errorf("service %q is not defined", rc.Service)
		}
	case split != nil:
		action = split
	case rc.Mock != nil:
		answers := make([]route.MockAnswer, 0, len(rc.Mock.Responses))
		for i := range rc.Mock.Responses {
			a := &rc.Mock.Responses[i]
			st, err := staticAnswer(a, 200)
			if err != nil {
				return nil, fmt.Errorf("mock.responses[%d]: %v", i, err)
			}
			answers = append(answers, route.MockAnswer{Answer: st, Delay: a.Delay.D()})
		}
		if action, err = route.NewMock(rc.Mock.Pick, answers); err != nil {
			return nil, err
		}
	default:
		var st *pipeline.Static
		if rc.Offline.Answer != nil {
			if st, err = staticAnswer(rc.Offline.Answer, 410); err != nil {
				return nil, fmt.Errorf("offline.answer: %v", err)
			}
		}
		from := ""
		if r.Kind == route.Prefix {
			from = r.Path
		}
		if action, err = route.NewOffline(from, rc.Offline.Successor, st); err != nil {
			return nil, err
		}
	}
	r.Chain = pipeline.NewChain(action, chainOrder(filters)...)
	return r, nil
}

// checkProtocols refuses a split to a gRPC or Dubbo service (a route
// reaches one directly), and a route to a Dubbo service without the step
// that makes Dubbo calls: there is nothing to relay HTTP to a Dubbo port.
// (The grpc and dubbo steps check their own service.)
func (s *Snapshot) checkProtocols(rc *Route) error {
	for _, it := range rc.Split {
		switch s.upstreams.Protocol(it.Service) {
		case "grpc":
			return fmt.Errorf("split: service %q speaks gRPC; a route reaches it directly (service: %s)", it.Service, it.Service)
		case "dubbo":
			return fmt.Errorf("split: service %q speaks Dubbo; a route reaches it directly, through its dubbo step (service: %s, dubbo: {…})", it.Service, it.Service)
		}
	}
	if _, step := rc.Features[dubboStep]; !step && s.upstreams.Protocol(rc.Service) == "dubbo" {
		return fmt.Errorf("service %q speaks Dubbo; the route calls it through a dubbo step (dubbo: {interface: …, method: …})", rc.Service)
	}
	return nil
}

// dubboStep is the key of the route step that calls Dubbo services
// (package dubbostep, which config does not import).
const dubboStep = "dubbo"

func (s *Snapshot) compileSplit(rc *Route) (*route.Split, error) {
	var key *source.Source
	rest := -1
	sum := 0.0
	targets := make([]route.SplitTarget, len(rc.Split))
	for i, it := range rc.Split {
		action := s.upstreams.Action(it.Service, it.Metadata)
		if action == nil {
			return nil, fmt.Errorf("split: service %q is not defined", it.Service)
		}
		targets[i] = route.SplitTarget{Name: it.Service, Action: action}
		if len(it.Metadata) > 0 {
			targets[i].Name = shareName(it.Service, it.Metadata)
		}
		if it.Percent == nil {
			if rest >= 0 {
				return nil, errors.New("split: only one item may leave out percent (it takes the rest)")
			}
			rest = i
		} else {
			targets[i].Percent = *it.Percent
			sum += *it.Percent
		}
		if it.Key != "" {
			k, err := source.Parse(it.Key)
			if err != nil {
				return nil, fmt.Errorf("split: %v", err)
			}
			if key != nil && key.String() != k.String() {
				return nil, fmt.Errorf("split: items use different keys %s and %s; one split hashes one key", key.String(), k.String())
			}
			key = &k
		}
	}
	if rest >= 0 {
		targets[rest].Percent = 100 - sum
	}
	var force []source.Source
	if f := rc.SplitForce; f != nil {
		if f.Header != "" {
			force = append(force, mustKey("header."+f.Header))
		}
		if f.Cookie != "" {
			force = append(force, mustKey("cookie."+f.Cookie))
		}
	}
	return route.NewSplit(targets, key, force)
}

// shareName names a share limited by metadata, for split_force and the
// decision logs: orders@version=v2.
func shareName(service string, meta map[string]string) string {
	keys := slices.Sorted(maps.Keys(meta))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + meta[k]
	}
	return service + "@" + strings.Join(parts, ",")
}

func mustKey(s string) source.Source {
	k, err := source.Parse(s)
	if err != nil {
		panic(err) // built from a fixed prefix and a non-empty name
	}
	return k
}

// fallbackChain picks among the fallback services by weight.
func (s *Snapshot) fallbackChain(fbs []Fallback) *pipeline.Chain {
	if len(fbs) == 1 {
		return s.forwardChain(fbs[0].Service)
	}
	targets := make([]route.SplitTarget, 0, len(fbs))
	for _, fb := range fbs {
		targets = append(targets, route.SplitTarget{Name: fb.Service, Percent: float64(max(fb.Weight, 1)),
			Action: s.upstreams.Action(fb.Service, nil)})
	}
	sp, err := route.NewSplitWeights(targets)
	if err != nil {
		panic(err) // every weight is at least 1
	}
	return pipeline.NewChain(sp, s.upstreams.Forwarding(nil))
}

func staticAnswer(a *Answer, defaultStatus int) (*pipeline.Static, error) {
	st := a.Status
	if st == 0 {
		st = defaultStatus
	}
	if st < 100 || st > 999 {
		return nil, fmt.Errorf("status %d is not an HTTP status", st)
	}
	ct := a.ContentType
	if ct == "" {
		ct = "application/json"
	}
	out := &pipeline.Static{Status: st, ContentType: []byte(ct), Body: []byte(a.Body)}
	for k, v := range a.Headers {
		out.Headers = append(out.Headers, [2][]byte{[]byte(k), []byte(v)})
	}
	return out, nil
}

func countSet(vals ...string) int {
	n := 0
	for _, v := range vals {
		if v != "" {
			n++
		}
	}
	return n
}

func boolStr(b bool) string {
	if b {
		return "x"
	}
	return ""
}

// headerPolicy compiles a route's header settings; nil when it has none.
func headerPolicy(rc *Route) (*codec.HeaderPolicy, error) {
	p := &codec.HeaderPolicy{}
	set := false
	if h := rc.Headers; h != nil {
		if len(h.Allow) > 0 && len(h.Deny) > 0 {
			return nil, errors.New("headers: use allow or deny, not both")
		}
		for _, list := range [][]string{h.Allow, h.Deny} {
			for _, name := range list {
				if !codec.ValidFieldName(name) {
					return nil, fmt.Errorf("headers: %q is not a header name", name)
				}
				if codec.IsGatewayOwned(name) {
					return nil, fmt.Errorf("headers: %s is set by the gateway; a route cannot pass or remove it", name)
				}
			}
		}
		p.Allow, p.Deny = h.Allow, h.Deny
		set = true
	}
	if v := rc.ForwardAuthorization; v != nil && !*v {
		p.DropAuthorization, set = true, true
	}
	if v := rc.ForwardCookies; v != nil && !*v {
		p.DropCookies, set = true, true
	}
	if !set {
		return nil, nil
	}
	return p, nil
}
