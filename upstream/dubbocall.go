package upstream

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/upstream/dubbo"
	"github.com/valyala/fasthttp"
)

// Dubbo providers. A service with protocol dubbo is called over the
// Dubbo 2 protocol (package dubbo): one multiplexed connection per
// instance, made on first use and again after it breaks. A route's dubbo
// step builds the generic call; the service makes it on the instance the
// balancer picks and writes the client's answer: the result as JSON, or
// the exception as a mapped status in the gateway's error shape. A call
// with no answer in time is a timeout (504), a refused connection a
// refusal (502), counted for health and breakers as for HTTP.

// DubboCall is a generic Dubbo call made in place of an HTTP exchange.
type DubboCall struct {
	Target *dubbo.Target
	Call   dubbo.Call
	// Exceptions maps exception classes to the HTTP status they are
	// answered with; any other exception is a 500.
	Exceptions map[string]int
	// Headers name the request header fields sent along as attachments
	// (lower-cased), besides the consumer and the trace context.
	Headers []string
}

// traceFields are the forwarded fields every call carries as
// attachments: the trace context the provider continues.
var traceFields = []string{"traceparent", "tracestate", "x-request-id"}

// attach adds the attempt's attachments: the consumer, the trace
// context and the chosen header fields, as forwarded.
func (dc *DubboCall) attach(c *pipeline.Ctx) {
	call := &dc.Call
	call.Rewind()
	if c.Consumer != "" {
		call.Attach("consumer", c.Consumer)
	}
	for _, name := range traceFields {
		if v := c.Fields.Get(name); v != nil {
			call.AttachBytes(name, v)
		}
	}
	for _, name := range dc.Headers {
		if v := c.Fields.Get(name); v != nil {
			call.AttachBytes(name, v)
		}
	}
}

var dubboCall = pipeline.NewSlot[*DubboCall]()

// SetDubboCall makes call the request's Dubbo call. The caller keeps
// ownership.
func SetDubboCall(c *pipeline.Ctx, call *DubboCall) { dubboCall.Set(c, call) }

// TakeDubboCall returns the request's Dubbo call and forgets it.
func TakeDubboCall(c *pipeline.Ctx) *DubboCall {
	call := dubboCall.Get(c)
	dubboCall.Clear(c)
	return call
}

// dubboConn is an instance's Dubbo connection holder, made on first use.
type dubboConn struct {
	mu     sync.Mutex
	in     *dubbo.Instance
	closed bool
}

func (in *Instance) dubboInstance() *dubbo.Instance {
	d := &in.dubbo
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.in == nil {
		// A closed instance's holder refuses calls itself (ErrClosed).
		d.in = dubbo.NewInstance(in.Addr, dubbo.Settings{Connect: in.pool.Connect, MaxInFlight: in.pool.MaxConns,
			MaxBody: in.pool.MaxResponseBytes})
		if d.closed {
			d.in.Close(0)
		}
	}
	return d.in
}

// dubboProbe is the instance's Dubbo connection holder, nil when it is
// not called over Dubbo (a probe makes none).
func (in *Instance) dubboProbe() *dubbo.Instance {
	d := &in.dubbo
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.in
}

// closeDubbo closes the instance's Dubbo connection once the calls on it
// had their time.
func (in *Instance) closeDubbo() {
	d := &in.dubbo
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	if d.in != nil {
		d.in.Close(grpcCloseGrace)
	}
}

var (
	errNoDubboStep = pipeline.NewCanned(fasthttp.StatusInternalServerError, "route to a Dubbo service has no dubbo step")
	errDubboBody   = pipeline.NewCanned(fasthttp.StatusBadGateway, "malformed answer from the Dubbo provider")
	jsonType       = []byte("application/json")
)

// dubboExchange makes the request's Dubbo call to in and writes the
// answer. An exception or an error status is an answer; a call without
// one (refused, reset, timed out) is an error, as for HTTP.
func (in *Instance) dubboExchange(c *pipeline.Ctx, deadline time.Time) error {
	dc := dubboCall.Get(c)
	if dc == nil {
		errNoDubboStep.WriteTo(c)
		return nil
	}
	dc.attach(c)
	var err error
	c.Block(pipeline.BlockingFunc(func() { // the reply comes through the connection's reader
		err = in.dubboInstance().Invoke(&dc.Call, deadline)
	}))
	var timeout dubbo.TimeoutError
	switch {
	case errors.As(err, &timeout):
		return err
	case errors.Is(err, dubbo.ErrBusy):
		return fasthttp.ErrNoFreeConns
	case errors.Is(err, dubbo.ErrClosed):
		return err
	case err != nil && isDial(err):
		return err
	case err != nil:
		// The connection is fine; the provider's answer is not.
		c.Decision = "malformed Dubbo answer: " + err.Error()
		errDubboBody.WriteTo(c)
		return nil
	}
	call := &dc.Call
	switch {
	case call.Status == dubbo.StatusServerTimeout || call.Status == dubbo.StatusClientTimeout:
		return dubbo.TimeoutError{}
	case call.Status != dubbo.StatusOK:
		status := fasthttp.StatusBadGateway
		if call.Status == dubbo.StatusThreadpoolFull {
			status = fasthttp.StatusServiceUnavailable
		}
		c.Decision = "Dubbo status " + strconv.Itoa(int(call.Status))
		pipeline.WriteError(c, status, call.Message, "dubbo_status", strconv.Itoa(int(call.Status)))
	case call.Exception != "":
		status, ok := dc.Exceptions[call.Exception]
		if !ok {
			status = fasthttp.StatusInternalServerError
		}
		c.Decision = "Dubbo exception " + call.Exception
		pipeline.WriteError(c, status, call.Message, "exception", call.Exception)
	default:
		c.DropAnswer()
		c.Resp.Reset()
		c.Resp.SetStatusCode(fasthttp.StatusOK)
		c.Resp.Header.SetContentTypeBytes(jsonType)
		c.Resp.SetBody(call.Result)
	}
	return nil
}

func isDial(err error) bool {
	return classify(err) == failRefused
}
