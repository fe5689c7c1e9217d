// Package dubbostep is the route step "dubbo": HTTP/JSON in, a generic
// call to a Dubbo provider (a service with protocol dubbo), JSON out. The
// route names the interface, method and parameter types, and where each
// argument comes from in the request; the call is made as Dubbo's own
// GenericService makes it ($invoke), so the gateway needs no Java classes
// and no generated code.
//
// The step runs after every other: signature, limits, WAF and recording
// see the JSON the client sent and the JSON it gets.
package dubbostep

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/source"
	"github.com/tollgate/tollgate/upstream"
	"github.com/tollgate/tollgate/upstream/dubbo"
	"github.com/valyala/fasthttp"
)

// Config is a route's dubbo setting.
//
//	dubbo:
//	  interface: com.shop.OrderService
//	  method: getOrder
//	  version: 1.0.0
//	  group: g1
//	  params:
//	    - {type: java.lang.String, from: query.id}
//	    - {type: com.shop.OrderQuery, from: json}
//	  exceptions: {com.shop.NotFound: 404}
//	  headers: [X-Tenant]
type Config struct {
	Interface  string         `yaml:"interface"`
	Method     string         `yaml:"method"`
	Version    string         `yaml:"version"`
	Group      string         `yaml:"group"`
	Params     []ParamConfig  `yaml:"params"`
	Exceptions map[string]int `yaml:"exceptions"`
	// Headers are request header fields sent as attachments.
	Headers []string `yaml:"headers"`
}

// ParamConfig is one argument: its Java type, and the request value it
// is made of: any value a route condition reads (query.id,
// header.X-User, path, json.order.id...), or json for the whole body.
type ParamConfig struct {
	Type string `yaml:"type"`
	From string `yaml:"from"`
}

// Key is the route setting.
const Key = "dubbo"

// maxParams bounds a method's parameters (Java allows 255).
const maxParams = 255

func init() {
	pipeline.Register(pipeline.Feature{
		Key:    Key,
		Stage:  pipeline.StageTranscode,
		Scope:  pipeline.ScopeRoute,
		Config: func() any { return new(Config) },
		Build: func(b *pipeline.Build, cfg any) (pipeline.Filter, error) {
			if !b.Route.Forwards || b.Route.Service == "" {
				return nil, errors.New("dubbo needs service: a Dubbo service to call (not split, mock or offline)")
			}
			services, _ := upstream.ServicesKey.Get(b.Env)
			if svc := services[b.Route.Service]; svc != nil && !svc.Dubbo() {
				return nil, fmt.Errorf("dubbo: service %q is not a Dubbo service; set protocol: dubbo on it", b.Route.Service)
			}
			return New(cfg.(*Config))
		},
	})
}

// arg is one argument's source.
type arg struct {
	param dubbo.Param
	body  bool // the whole JSON body
	from  source.Source
}

// Step is the dubbo route step (a pipeline.Filter and ResponseFilter).
type Step struct {
	target     *dubbo.Target
	args       []arg
	exceptions map[string]int
	headers    []string
	readsBody  bool
	calls      sync.Pool // *upstream.DubboCall
}

// New builds the step.
func New(cfg *Config) (*Step, error) {
	if cfg.Interface == "" || cfg.Method == "" {
		return nil, errors.New("dubbo needs interface and method")
	}
	if len(cfg.Params) > maxParams {
		return nil, fmt.Errorf("dubbo: %d params; a Java method takes at most %d", len(cfg.Params), maxParams)
	}
	s := &Step{exceptions: cfg.Exceptions}
	params := make([]dubbo.Param, len(cfg.Params))
	for i, pc := range cfg.Params {
		p, err := dubbo.NewParam(pc.Type)
		if err != nil {
			return nil, fmt.Errorf("dubbo params[%d]: %v", i, err)
		}
		params[i] = p
		a := arg{param: p}
		switch {
		case pc.From == "json":
			a.body, s.readsBody = true, true
		case pc.From == "":
			return nil, fmt.Errorf("dubbo params[%d]: from names the request value (query.id, json, ...)", i)
		default:
			src, err := source.Parse(pc.From)
			if err != nil {
				return nil, fmt.Errorf("dubbo params[%d]: %v", i, err)
			}
			a.from = src
		}
		s.args = append(s.args, a)
	}
	for class, status := range cfg.Exceptions {
		if status < 400 || status > 599 {
			return nil, fmt.Errorf("dubbo exceptions: %s maps to %d; want an error status (400-599)", class, status)
		}
	}
	for _, h := range cfg.Headers {
		if h == "" || strings.ContainsAny(h, " :\r\n") {
			return nil, fmt.Errorf("dubbo headers: %q is not a header field name", h)
		}
		s.headers = append(s.headers, strings.ToLower(h))
	}
	t, err := dubbo.NewTarget(cfg.Interface, cfg.Version, cfg.Group, cfg.Method, params)
	if err != nil {
		return nil, err
	}
	s.target = t
	s.calls.New = func() any { return new(upstream.DubboCall) }
	return s, nil
}

var (
	errStreamed = pipeline.NewCanned(fasthttp.StatusRequestEntityTooLarge, "request body too large to convert")
	errNotJSON  = pipeline.NewCanned(fasthttp.StatusUnsupportedMediaType, "request body must be JSON (Content-Type: application/json)")
)

// Handle implements pipeline.Filter: it builds the call and leaves it for
// the service.
func (s *Step) Handle(c *pipeline.Ctx) pipeline.Verdict {
	if s.readsBody {
		if c.Req.IsBodyStream() {
			return c.Reject(errStreamed)
		}
		if ct := c.Req.Header.ContentType(); len(c.Req.Body()) > 0 && len(ct) > 0 && source.MediaOf(ct) != source.MediaJSON {
			return c.Reject(errNotJSON)
		}
	}
	dc := s.calls.Get().(*upstream.DubboCall)
	dc.Target, dc.Exceptions, dc.Headers = s.target, s.exceptions, s.headers
	call := &dc.Call
	call.Begin(s.target)
	r := source.NewReader(c)
	for i := range s.args {
		if err := s.appendArg(c, &r, call, i); err != nil {
			s.calls.Put(dc)
			pipeline.WriteError(c, http.StatusBadRequest, err.Error())
			c.Decision = "request does not convert to the Dubbo call"
			return pipeline.Stop
		}
	}
	call.Attachments(s.target)
	upstream.SetDubboCall(c, dc)
	return pipeline.Continue
}

func (s *Step) appendArg(c *pipeline.Ctx, r *source.Reader, call *dubbo.Call, i int) error {
	a := &s.args[i]
	var err error
	if a.body {
		call.Frame, err = a.param.AppendJSON(call.Frame, c.Req.Body())
		return argError(i, err)
	}
	v, found := r.Value(&a.from)
	switch found {
	case source.Absent:
		call.Frame, err = a.param.AppendMissing(call.Frame)
	case source.Container:
		err = fmt.Errorf("%s is an object or array; take it with from: json", a.from.String())
	default:
		call.Frame, err = a.param.AppendText(call.Frame, v)
	}
	return argError(i, err)
}

func argError(i int, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("argument %d: %s", i, strings.TrimPrefix(err.Error(), "dubbo: "))
}

// HandleResponse implements pipeline.ResponseFilter: the service wrote
// the answer; the call goes back to the pool.
func (s *Step) HandleResponse(c *pipeline.Ctx) {
	if dc := upstream.TakeDubboCall(c); dc != nil {
		s.calls.Put(dc)
	}
}
