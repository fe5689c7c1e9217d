package upstream

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/adaptive"
	"github.com/tollgate/tollgate/breaker"
	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/source"
	"github.com/valyala/fasthttp"
)

// Service is a named group of instances behind one balancer, with the
// timeouts and retry policy requests to it follow. A Service is immutable
// and belongs to one config snapshot; its instances may be shared.
type Service struct {
	Name string

	// set is the instances requests go to and the balancer over them;
	// a discovered service's is rebuilt by its members when the set
	// changes.
	set     atomic.Pointer[instanceSet]
	members *Members          // nil: the instances written in the file
	match   map[string]string // a split's selection by metadata (Select)
	balance string
	hashKey source.Source

	// Total bounds one client request's whole upstream exchange, retry
	// included; default 5s.
	Total time.Duration
	// Retry is how many extra tries (0 or 1) an idempotent request gets on
	// another instance after a connection-level failure.
	Retry int
	// RetryPutDelete extends retries to PUT and DELETE, which are idempotent
	// by definition but not always by implementation.
	RetryPutDelete bool
	// Connect is the instances' connect timeout: a retry is not started
	// with less than this left of the budget.
	Connect time.Duration

	// breaker (nil when none) fails fast while the service is failing.
	breaker    *breaker.Breaker
	classifier breaker.Classifier
	// gate (nil when none) bounds the requests in flight to the service.
	gate *adaptive.Gate

	// grpc: the instances speak gRPC (grpc.go), over TLS when grpcTLS is
	// set.
	grpc    bool
	grpcTLS *GRPCTLS
	// dubbo: the instances are Dubbo providers (dubbocall.go).
	dubbo bool
}

// ServiceConfig is what NewService needs.
type ServiceConfig struct {
	Name           string
	Balance        string // round_robin (default) | least_conn | hash
	Key            string // hash: the request value hashed (a source, e.g. header.X-User-Id)
	Total          time.Duration
	Connect        time.Duration
	Retry          int
	RetryPutDelete bool
	// Breaker is the service's breaker (nil for none) and the statuses it
	// counts as failures.
	Breaker       *breaker.Breaker
	FailureStatus []int
	// Gate bounds the requests in flight (nil for no bound).
	Gate *adaptive.Gate
	// Protocol is "http" (default) or "grpc"; GRPCTLS makes gRPC calls
	// over TLS.
	Protocol string
	GRPCTLS  *GRPCTLS
	// Members, when set, are the service's instances, found in a
	// registry; the instances passed to NewService are then none.
	Members *Members
}

// Protocols names the protocols a service may speak.
var Protocols = []string{"http", "grpc", "dubbo"}

// Balance names the balancers a config may ask for.
var Balance = []string{"round_robin", "least_conn", "hash"}

// NewService builds a service over instances (or its discovered
// members).
func NewService(cfg ServiceConfig, instances []*Instance) (*Service, error) {
	if len(instances) == 0 && cfg.Members == nil {
		return nil, fmt.Errorf("service %q has no instances", cfg.Name)
	}
	s := &Service{Name: cfg.Name, Total: cfg.Total, Retry: cfg.Retry, RetryPutDelete: cfg.RetryPutDelete,
		Connect: cfg.Connect, breaker: cfg.Breaker, classifier: breaker.NewClassifier(cfg.FailureStatus),
		members: cfg.Members, balance: cfg.Balance, gate: cfg.Gate}
	switch cfg.Protocol {
	case "", "http":
		if cfg.GRPCTLS != nil {
			return nil, fmt.Errorf("service %q: tls applies to protocol: grpc", cfg.Name)
		}
	case "grpc":
		s.grpc, s.grpcTLS = true, cfg.GRPCTLS
	case "dubbo":
		if cfg.GRPCTLS != nil {
			return nil, fmt.Errorf("service %q: tls applies to protocol: grpc", cfg.Name)
		}
		s.dubbo = true
	default:
		return nil, fmt.Errorf("service %q: unknown protocol %q (want http, grpc or dubbo)", cfg.Name, cfg.Protocol)
	}
	if s.Total <= 0 {
		s.Total = 5 * time.Second
	}
	if s.Connect <= 0 {
		s.Connect = time.Second
	}
	if cfg.Key != "" && cfg.Balance != "hash" {
		return nil, fmt.Errorf("service %q: key applies to balance: hash", cfg.Name)
	}
	if s.Retry < 0 || s.Retry > 1 {
		return nil, fmt.Errorf("service %q: retry must be 0 or 1, got %d", cfg.Name, cfg.Retry)
	}
	switch cfg.Balance {
	case "", "round_robin", "least_conn":
	case "hash":
		if cfg.Key == "" {
			return nil, fmt.Errorf("service %q: balance: hash needs a key (e.g. header.X-User-Id)", cfg.Name)
		}
		key, err := source.Parse(cfg.Key)
		if err != nil {
			return nil, fmt.Errorf("service %q: %w", cfg.Name, err)
		}
		s.hashKey = key
	default:
		return nil, fmt.Errorf("service %q: unknown balance %q (want round_robin, least_conn or hash)", cfg.Name, cfg.Balance)
	}
	if s.members == nil {
		s.set.Store(s.balanced(instances))
	} else {
		s.members.attach(s)
	}
	return s, nil
}

// Gateway answers for upstream failures.
var (
	errBadGateway  = pipeline.NewCanned(fasthttp.StatusBadGateway, "upstream refused or reset the connection")
	errTimeout     = pipeline.NewCanned(fasthttp.StatusGatewayTimeout, "upstream timed out")
	errNoInstance  = pipeline.NewCanned(fasthttp.StatusServiceUnavailable, "no healthy upstream instance")
	errBusy        = pipeline.NewCanned(fasthttp.StatusServiceUnavailable, "upstream connection limit reached")
	errOpen        = pipeline.NewCanned(fasthttp.StatusServiceUnavailable, "service unavailable: circuit breaker open").WithHeader("Retry-After", "5")
	errBodyTooBig  = pipeline.NewCanned(fasthttp.StatusBadGateway, "upstream response too large")
	errClientBody  = pipeline.NewCanned(fasthttp.StatusRequestEntityTooLarge, "request body too large")
	errClientChunk = pipeline.NewCanned(fasthttp.StatusBadRequest, "malformed request: invalid chunked body")
	errClientSlow  = pipeline.NewCanned(fasthttp.StatusRequestTimeout, "request body not received within the service's time budget")
)

// failure classifies an upstream error.
type failure uint8

const (
	failRefused failure = iota // nothing reached the backend: safe to retry
	failReset                  // the connection broke mid-exchange
	failTimeout
	failBusy
	failBodyTooBig
	failClientBody    // a streamed client body passed the limit
	failClientFraming // a streamed chunked client body broke its framing
	failClientSlow    // a streamed client body had not arrived when the budget ran out
)

func (f failure) result() pipeline.Result {
	switch f {
	case failRefused:
		return pipeline.ResultRefused
	case failTimeout:
		return pipeline.ResultTimeout
	case failBusy:
		return pipeline.ResultBusy
	case failBodyTooBig:
		return pipeline.ResultTooLarge
	case failClientBody, failClientFraming, failClientSlow:
		return pipeline.ResultClientBody
	}
	return pipeline.ResultReset
}

func classify(err error) failure {
	var opErr *net.OpError
	switch {
	case errors.Is(err, codec.ErrBodyTooLarge):
		return failClientBody
	case errors.Is(err, codec.ErrBadChunk):
		return failClientFraming
	case errors.Is(err, codec.ErrBodyTimeout):
		return failClientSlow
	case errors.Is(err, fasthttp.ErrNoFreeConns):
		return failBusy
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		return failBodyTooBig
	case errors.Is(err, fasthttp.ErrDialTimeout):
		return failTimeout
	case errors.Is(err, fasthttp.ErrTimeout):
		return failTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return failRefused
	case errors.As(err, &opErr) && opErr.Op == "dial":
		if opErr.Timeout() {
			return failTimeout
		}
		return failRefused
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return failTimeout
	}
	return failReset
}

// Serve forwards c.Req to one of the service's instances and leaves the
// answer (or the gateway's error answer) in c.Resp. It implements
// pipeline.Action.
//
// The budget is the service's total (or the route's own deadline when
// sooner) from the request's start, retry included; a retry goes to
// another available instance, only for an idempotent request that failed
// before an answer, and only with at least a connect timeout left. The
// service's breaker sees one outcome per client request.
func (s *Service) Serve(c *pipeline.Ctx) {
	start := c.Start
	if start.IsZero() {
		start = time.Now()
	}
	deadline := start.Add(s.Total)
	if !c.Deadline.IsZero() && c.Deadline.Before(deadline) {
		deadline = c.Deadline
	}
	c.Outcome.Service = s.Name
	boundBody(c, deadline)
	var gen uint64
	if s.breaker != nil {
		var ok bool
		if gen, ok = s.breaker.Allow(); !ok {
			c.Outcome.Result = pipeline.ResultOpen
			c.Decision = "service breaker open"
			errOpen.WriteTo(c)
			return
		}
	}
	if c.Upgrade != nil {
		s.switchProtocols(c, deadline)
		if s.breaker != nil {
			s.breaker.Release(gen)
		}
		return
	}
	var ticket adaptive.Ticket
	if s.gate != nil {
		var ok bool
		if ticket, ok = s.gate.Acquire(c); !ok {
			if s.breaker != nil {
				s.breaker.Release(gen)
			}
			return
		}
	}
	began := c.Now()
	set := s.current()
	var tried *Instance
	for attempt := 0; ; attempt++ {
		in := set.balancer.Pick(c, tried)
		if in == nil {
			if tried == nil {
				errNoInstance.WriteTo(c)
				c.Outcome.Result = pipeline.ResultNoInstance
			}
			// After a failed first try with nowhere else to go, the first
			// try's error answer stays.
			break
		}
		if tried != nil {
			// Only now that there is another try: until then the
			// failed one's error answer stands.
			c.Resp.Reset()
		}
		c.Outcome.Instance = in.Addr
		c.Outcome.Attempts++
		in.began(c.Stripe())
		span := s.startAttempt(c)
		var err error
		if s.grpc {
			err = in.grpcExchange(c, deadline, s.grpcTLS)
		} else if s.dubbo {
			err = in.dubboExchange(c, deadline)
		} else {
			err = in.exchange(c, deadline)
		}
		in.ended(c.Stripe())
		if err == nil {
			// A gRPC answer is the gateway's own writing; one kept as
			// read (c.Answer) left its hop-by-hop fields behind already,
			// and c.Resp's header is not what the client receives.
			if !s.grpc && !s.dubbo && !c.Answer.Active() {
				StripResponse(c.Resp)
			}
			c.Outcome.Result = pipeline.ResultOK
			if c.Outcome.Status == 0 { // a passed-through gRPC call set its own
				c.Outcome.Status = c.Resp.StatusCode()
			}
			if c.Outcome.Status >= 500 {
				s.failed(in, false)
			} else {
				in.health.ok()
			}
			s.endAttempt(c, span, in, pipeline.ResultOK, c.Outcome.Status)
			break
		}
		f := s.exchangeFailed(c, in, err)
		s.endAttempt(c, span, in, f.result(), 0)
		if attempt >= s.Retry || !s.mayRetry(c, f) || deadline.Sub(c.Now()) < s.Connect {
			break
		}
		tried = in
	}
	c.Outcome.Latency = c.Now().Sub(began)
	if s.gate != nil {
		s.gate.ReleaseOutcome(c, ticket)
	}
	if s.breaker != nil {
		if c.Outcome.Counted() {
			s.breaker.Done(c.Stripe(), gen, s.classifier.Success(&c.Outcome))
		} else {
			s.breaker.Release(gen)
		}
	}
}

// exchangeFailed records an exchange with in that failed with err (the
// outcome, the instance's error count and health) and answers it.
func (s *Service) exchangeFailed(c *pipeline.Ctx, in *Instance, err error) failure {
	f := classify(err)
	c.Outcome.Result = f.result()
	if c.Outcome.Result.UpstreamFailure() {
		in.failedOn(c.Stripe())
		s.failed(in, f == failRefused)
	}
	writeFailure(c, f)
	return f
}

// failed counts a failure of in, and ejects it when its health says so,
// unless it is the last instance of the service still in rotation.
func (s *Service) failed(in *Instance, refused bool) {
	if !in.health.failed(refused) {
		return
	}
	for _, other := range s.current().instances {
		if other != in && other.Available() {
			in.eject(s.Name, time.Now())
			return
		}
	}
	in.keep(s.Name)
}

// GRPC reports whether the service's instances speak gRPC.
func (s *Service) GRPC() bool { return s.grpc }

// Dubbo reports whether the service's instances are Dubbo providers.
func (s *Service) Dubbo() bool { return s.dubbo }

// Breaker returns the service's breaker, nil when it has none.
func (s *Service) Breaker() *breaker.Breaker { return s.breaker }

// mayRetry allows one more try only where the backend cannot have acted on
// the request twice: an idempotent method, a body still in memory, and a
// failure before or instead of an answer. A timeout is not retried: the
// backend may still be working on it and the deadline is mostly spent.
func (s *Service) mayRetry(c *pipeline.Ctx, f failure) bool {
	if f != failRefused && f != failReset {
		return false
	}
	return !c.Req.IsBodyStream() && idempotent(&c.Req.Header, s.RetryPutDelete)
}

// idempotent reports a method that may be sent twice: GET, HEAD and
// OPTIONS, and PUT and DELETE when putDelete says their implementations
// are idempotent too.
func idempotent(h *fasthttp.RequestHeader, putDelete bool) bool {
	switch {
	case h.IsGet(), h.IsHead(), h.IsOptions():
		return true
	case h.IsPut(), h.IsDelete():
		return putDelete
	}
	return false
}

func writeFailure(c *pipeline.Ctx, f failure) {
	switch f {
	case failTimeout:
		errTimeout.WriteTo(c)
	case failBusy:
		errBusy.WriteTo(c)
	case failBodyTooBig:
		errBodyTooBig.WriteTo(c)
	case failClientBody:
		errClientBody.WriteTo(c)
		c.CloseConn = true
	case failClientFraming:
		errClientChunk.WriteTo(c)
		c.CloseConn = true
	case failClientSlow:
		errClientSlow.WriteTo(c)
		c.CloseConn = true
	default:
		errBadGateway.WriteTo(c)
	}
}

// StripResponse removes hop-by-hop fields from an upstream answer.
func StripResponse(resp *fasthttp.Response) {
	codec.StripResponseHopByHop(&resp.Header)
}
