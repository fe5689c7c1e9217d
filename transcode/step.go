package transcode

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/tollgate/tollgate/internal/bytesconv"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/source"
	"github.com/tollgate/tollgate/upstream"
	"github.com/valyala/fasthttp"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Step is the grpc route step (a pipeline.Filter and ResponseFilter).
type Step struct {
	method  string // "/shop.v1.Orders/Create"
	in, out *messagePlan
	// inDesc and outDesc are the messages' descriptors, for tests that
	// decode what the step wrote.
	inDesc, outDesc protoreflect.MessageDescriptor
	rule            httpRule
	hasRule         bool
	bodyField       *fieldPlan // body: <field>
	respField       *fieldPlan // response_body: <field>

	protoNames, emitDefaults bool

	calls    sync.Pool // *upstream.GRPCCall
	encoders sync.Pool // *wireEncoder
	writers  sync.Pool // *jsonWriter
}

func newStep(cfg *Config, m protoreflect.MethodDescriptor) (*Step, error) {
	s := &Step{
		method:       "/" + string(m.Parent().FullName()) + "/" + string(m.Name()),
		inDesc:       m.Input(),
		outDesc:      m.Output(),
		protoNames:   cfg.ProtoNames,
		emitDefaults: cfg.EmitDefaults,
	}
	var err error
	if s.in, err = planFor(m.Input()); err != nil {
		return nil, fmt.Errorf("method %s: %v", s.method, err)
	}
	if s.out, err = planFor(m.Output()); err != nil {
		return nil, fmt.Errorf("method %s: %v", s.method, err)
	}
	rule, ok, err := readHTTPRule(m)
	if err != nil {
		return nil, fmt.Errorf("method %s: %v", s.method, err)
	}
	s.rule, s.hasRule = rule, ok
	if !ok {
		s.rule.Body = "*" // no annotation: the whole message is the body
	}
	if b := s.rule.Body; b != "" && b != "*" {
		f := s.in.messageField(b)
		if f == nil {
			return nil, fmt.Errorf("method %s: body %q is not a message field of %s", s.method, b, s.in.fullName)
		}
		s.bodyField = f
	}
	if b := s.rule.ResponseBody; b != "" {
		f := s.out.messageField(b)
		if f == nil {
			return nil, fmt.Errorf("method %s: response_body %q is not a message field of %s", s.method, b, s.out.fullName)
		}
		s.respField = f
	}
	if s.hasRule {
		for _, v := range s.rule.Path.vars {
			var buf [maxFieldPath]*fieldPlan
			if _, err := resolvePath(s.in, v.Field, &buf); err != nil {
				return nil, fmt.Errorf("method %s: path variable %s: %v", s.method, v.Field, err)
			}
		}
	}
	s.calls.New = func() any { return new(upstream.GRPCCall) }
	s.encoders.New = func() any { return new(wireEncoder) }
	s.writers.New = func() any { return new(jsonWriter) }
	return s, nil
}

// messageField is the singular message field named (by proto name) name,
// nil when there is none.
func (m *messagePlan) messageField(name string) *fieldPlan {
	i, ok := m.byProto[name]
	if !ok {
		return nil
	}
	f := &m.fields[i]
	if f.kind != protoreflect.MessageKind || f.list || f.isMap {
		return nil
	}
	return f
}

// Method is the full name of the method the step calls.
func (s *Step) Method() string { return s.method }

var (
	errStreamed = pipeline.NewCanned(fasthttp.StatusRequestEntityTooLarge, "request body too large to transcode")
	errNotJSON  = pipeline.NewCanned(fasthttp.StatusUnsupportedMediaType, "request body must be JSON (Content-Type: application/json)")
)

// Handle implements pipeline.Filter: it builds the request message and
// leaves the call for the service.
func (s *Step) Handle(c *pipeline.Ctx) pipeline.Verdict {
	if c.Req.IsBodyStream() {
		return c.Reject(errStreamed)
	}
	call := s.calls.Get().(*upstream.GRPCCall)
	call.Reset()
	enc := s.encoders.Get().(*wireEncoder)
	enc.out = call.Request[:0]
	status, err := s.fill(c, enc)
	call.Request, enc.out = enc.out, nil
	s.encoders.Put(enc)
	if err != nil {
		s.calls.Put(call)
		pipeline.WriteError(c, status, err.Error())
		c.Decision = "request does not transcode"
		return pipeline.Stop
	}
	call.Method = s.method
	upstream.SetGRPCCall(c, call)
	return pipeline.Continue
}

// fill writes the request message's wire bytes: the JSON body (all of
// it, or one field of the message), then the path's variables, then the
// query's parameters (unless the body is the whole message). It returns
// the status to answer an error with.
func (s *Step) fill(c *pipeline.Ctx, enc *wireEncoder) (int, error) {
	body := c.Req.Body()
	if len(body) > 0 {
		if ct := c.Req.Header.ContentType(); len(ct) > 0 && source.MediaOf(ct) != source.MediaJSON {
			return errNotJSON.Status, errors.New(errNotJSON.Message)
		}
		var err error
		switch {
		case s.rule.Body == "*":
			err = enc.encode(s.in, body)
		case s.bodyField != nil:
			enc.out = protowire.AppendTag(enc.out, s.bodyField.num, protowire.BytesType)
			at := enc.beginLen()
			err = enc.encode(s.bodyField.msg, body)
			enc.endLen(at)
		default:
			return fasthttp.StatusBadRequest, fmt.Errorf("%s takes no request body", s.method)
		}
		if err != nil {
			return fasthttp.StatusBadRequest, fmt.Errorf("invalid request body: %v", err)
		}
	}
	if s.hasRule {
		ok, err := s.rule.Path.match(bytesconv.B2S(c.Target.Path), func(field, value string) error {
			return enc.setField(s.in, field, value, true)
		})
		switch {
		case err != nil:
			return fasthttp.StatusBadRequest, err
		case !ok:
			return fasthttp.StatusNotFound, fmt.Errorf("path %s is not one of %s's", c.Target.Path, s.method)
		}
	}
	if s.rule.Body == "*" {
		return 0, nil // the body is the whole message: no query parameters
	}
	// A parameter may not redo what the path or the body set (filters and
	// the route matched on those), and a single-valued field takes one
	// value: which of two a backend would get is not for the client to
	// play with.
	var qerr error
	var seenBuf [8]string
	seen := seenBuf[:0]
	c.QueryArgs().VisitAll(func(k, v []byte) {
		if qerr != nil {
			return
		}
		key := urlKey(k)
		if s.boundElsewhere(key) {
			return
		}
		var buf [maxFieldPath]*fieldPlan
		if fps, err := resolvePath(s.in, key, &buf); err == nil && !fps[len(fps)-1].list {
			if slices.Contains(seen, key) {
				qerr = fmt.Errorf("field %q given twice", key)
				return
			}
			seen = append(seen, key)
		}
		qerr = enc.setField(s.in, key, urlKey(v), false)
	})
	if qerr != nil {
		return fasthttp.StatusBadRequest, qerr
	}
	return 0, nil
}

// boundElsewhere reports a query key naming a field (or a field inside
// one) that a path variable or the body field sets.
func (s *Step) boundElsewhere(key string) bool {
	covers := func(field string) bool {
		return key == field || strings.HasPrefix(key, field+".")
	}
	if s.bodyField != nil && covers(s.rule.Body) {
		return true
	}
	if s.hasRule {
		for _, v := range s.rule.Path.vars {
			if covers(v.Field) {
				return true
			}
		}
	}
	return false
}

// HandleResponse implements pipeline.ResponseFilter: a reply becomes the
// JSON answer; a status (or a refusal made before the call) is left as the
// service wrote it.
func (s *Step) HandleResponse(c *pipeline.Ctx) {
	call := upstream.TakeGRPCCall(c)
	if call == nil {
		return
	}
	defer s.calls.Put(call)
	if !call.Done || call.Code != 0 {
		return
	}
	if checkWire(s.out, call.Reply, 1) != nil {
		pipeline.WriteError(c, fasthttp.StatusBadGateway, "upstream reply is not a "+s.out.fullName)
		c.Outcome.Status = fasthttp.StatusBadGateway
		return
	}
	w := s.writers.Get().(*jsonWriter)
	defer s.writers.Put(w)
	w.out, w.protoNames, w.emitDefaults, w.mergedUsed = c.Scratch[:0], s.protoNames, s.emitDefaults, 0
	var err error
	if s.respField != nil {
		err = w.field0(s.out, s.respField, call.Reply)
	} else {
		err = w.message(s.out, call.Reply)
	}
	b := w.out
	w.out = nil
	if err != nil {
		pipeline.WriteError(c, fasthttp.StatusBadGateway, "upstream reply does not render as JSON")
		return
	}
	r := c.Resp
	r.ResetBody()
	r.SetStatusCode(fasthttp.StatusOK)
	r.Header.SetContentType("application/json")
	r.SetBody(b)
	c.Scratch = b[:0]
}
