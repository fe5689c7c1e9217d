package transcode

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/tollgate/tollgate/internal/bytesconv"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/tollgate/tollgate/source"
	"github.com/tollgate/tollgate/upstream"
	"github.com/valyala/fasthttp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Step is the grpc route step (a pipeline.Filter and ResponseFilter).
type Step struct {
	method    string // "/shop.v1.Orders/Create"
	in, out   protoreflect.MessageDescriptor
	rule      httpRule
	hasRule   bool
	bodyField protoreflect.FieldDescriptor // body: <field>
	respField protoreflect.FieldDescriptor // response_body: <field>
	marshal   protojson.MarshalOptions

	calls sync.Pool // *upstream.GRPCCall
	ins   sync.Pool // *dynamicpb.Message of in
	outs  sync.Pool // *dynamicpb.Message of out
}

func newStep(cfg *Config, m protoreflect.MethodDescriptor) (*Step, error) {
	s := &Step{
		method:  "/" + string(m.Parent().FullName()) + "/" + string(m.Name()),
		in:      m.Input(),
		out:     m.Output(),
		marshal: protojson.MarshalOptions{UseProtoNames: cfg.ProtoNames, EmitUnpopulated: cfg.EmitDefaults},
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
		f := s.in.Fields().ByName(protoreflect.Name(b))
		if f == nil || f.Kind() != protoreflect.MessageKind || f.IsList() || f.IsMap() {
			return nil, fmt.Errorf("method %s: body %q is not a message field of %s", s.method, b, s.in.FullName())
		}
		s.bodyField = f
	}
	if b := s.rule.ResponseBody; b != "" {
		f := s.out.Fields().ByName(protoreflect.Name(b))
		if f == nil || f.Kind() != protoreflect.MessageKind || f.IsList() || f.IsMap() {
			return nil, fmt.Errorf("method %s: response_body %q is not a message field of %s", s.method, b, s.out.FullName())
		}
		s.respField = f
	}
	if s.hasRule {
		for _, v := range s.rule.Path.vars {
			if _, err := fieldPath(s.in, v.Field); err != nil {
				return nil, fmt.Errorf("method %s: path variable %s: %v", s.method, v.Field, err)
			}
		}
	}
	s.calls.New = func() any { return new(upstream.GRPCCall) }
	s.ins.New = func() any { return dynamicpb.NewMessage(s.in) }
	s.outs.New = func() any { return dynamicpb.NewMessage(s.out) }
	return s, nil
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
	msg := s.ins.Get().(*dynamicpb.Message)
	defer func() {
		proto.Reset(msg)
		s.ins.Put(msg)
	}()
	if status, err := s.fill(c, msg); err != nil {
		pipeline.WriteError(c, status, err.Error())
		c.Decision = "request does not transcode"
		return pipeline.Stop
	}
	call := s.calls.Get().(*upstream.GRPCCall)
	call.Reset()
	call.Method = s.method
	var err error
	if call.Request, err = (proto.MarshalOptions{}).MarshalAppend(call.Request, msg); err != nil {
		s.calls.Put(call)
		pipeline.WriteError(c, fasthttp.StatusBadRequest, "request does not encode: "+err.Error())
		return pipeline.Stop
	}
	upstream.SetGRPCCall(c, call)
	return pipeline.Continue
}

// fill builds msg from the request: the JSON body (all of it, or one field
// of the message), then the path's variables, then the query's
// parameters (unless the body is the whole message). It returns the status
// to answer an error with.
func (s *Step) fill(c *pipeline.Ctx, msg *dynamicpb.Message) (int, error) {
	body := c.Req.Body()
	if len(body) > 0 {
		if ct := c.Req.Header.ContentType(); len(ct) > 0 && source.MediaOf(ct) != source.MediaJSON {
			return errNotJSON.Status, fmt.Errorf("%s", errNotJSON.Message)
		}
		var target proto.Message
		switch {
		case s.rule.Body == "*":
			target = msg
		case s.bodyField != nil:
			target = msg.Mutable(s.bodyField).Message().Interface()
		default:
			return fasthttp.StatusBadRequest, fmt.Errorf("%s takes no request body", s.method)
		}
		if err := protojson.Unmarshal(body, target); err != nil {
			return fasthttp.StatusBadRequest, fmt.Errorf("invalid request body: %s", jsonError(err))
		}
	}
	if s.hasRule {
		ok, err := s.rule.Path.match(bytesconv.B2S(c.Target.Path), func(field, value string) error {
			return setField(msg, field, value, true)
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
	var seen []string
	c.QueryArgs().VisitAll(func(k, v []byte) {
		if qerr != nil {
			return
		}
		key := string(k)
		if s.boundElsewhere(key) {
			return
		}
		if fds, err := fieldPath(s.in, key); err == nil && !fds[len(fds)-1].IsList() {
			if slices.Contains(seen, key) {
				qerr = fmt.Errorf("field %q given twice", key)
				return
			}
			seen = append(seen, key)
		}
		qerr = setField(msg, key, string(v), false)
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
	if s.bodyField != nil && covers(string(s.bodyField.Name())) {
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
	out := s.outs.Get().(*dynamicpb.Message)
	defer func() {
		proto.Reset(out)
		s.outs.Put(out)
	}()
	if err := proto.Unmarshal(call.Reply, out); err != nil {
		pipeline.WriteError(c, fasthttp.StatusBadGateway, "upstream reply is not a "+string(s.out.FullName()))
		c.Outcome.Status = fasthttp.StatusBadGateway
		return
	}
	var m proto.Message = out
	if s.respField != nil {
		m = out.Get(s.respField).Message().Interface()
	}
	b, err := s.marshal.MarshalAppend(c.Scratch[:0], m)
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

// jsonError is protojson's error without its "proto: " prefix: it names the
// field and what was wrong ("unknown field \"colour\"").
func jsonError(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "proto:")
	msg = strings.TrimPrefix(msg, "\u00a0") // protojson's non-breaking space
	return strings.TrimSpace(msg)
}

// fieldPath resolves a dotted field path ("shelf.name") in md, by proto or
// JSON name: every element but the last a singular message field.
func fieldPath(md protoreflect.MessageDescriptor, path string) ([]protoreflect.FieldDescriptor, error) {
	var out []protoreflect.FieldDescriptor
	parts := strings.Split(path, ".")
	for i, p := range parts {
		f := md.Fields().ByName(protoreflect.Name(p))
		if f == nil {
			f = md.Fields().ByJSONName(p)
		}
		if f == nil {
			return nil, fmt.Errorf("%s has no field %q", md.FullName(), p)
		}
		out = append(out, f)
		if i < len(parts)-1 {
			if f.Kind() != protoreflect.MessageKind || f.IsList() || f.IsMap() {
				return nil, fmt.Errorf("field %q is not a message", p)
			}
			md = f.Message()
		}
	}
	return out, nil
}

// setField sets the field at path to value, parsed as the field's type
// (appended to a repeated field). An unknown field is an error only when
// required (a path variable); unknown query parameters are left alone:
// they may be the gateway's own (a signature's) or a client's extra.
func setField(msg *dynamicpb.Message, path, value string, required bool) error {
	fds, err := fieldPath(msg.Descriptor(), path)
	if err != nil {
		if required {
			return err
		}
		return nil
	}
	m := protoreflect.Message(msg)
	for _, f := range fds[:len(fds)-1] {
		m = m.Mutable(f).Message()
	}
	f := fds[len(fds)-1]
	if f.IsMap() || (f.Kind() == protoreflect.MessageKind || f.Kind() == protoreflect.GroupKind) {
		return fmt.Errorf("field %q cannot be set from a URL", path)
	}
	v, err := scalar(f, value)
	if err != nil {
		return fmt.Errorf("field %q: %v", path, err)
	}
	if f.IsList() {
		m.Mutable(f).List().Append(v)
		return nil
	}
	m.Set(f, v)
	return nil
}

// scalar parses s as a value of f's type.
func scalar(f protoreflect.FieldDescriptor, s string) (protoreflect.Value, error) {
	bad := func(err error) (protoreflect.Value, error) {
		return protoreflect.Value{}, fmt.Errorf("invalid %s %q", f.Kind(), s)
	}
	switch f.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(s), nil
	case protoreflect.BytesKind:
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			if b, err = base64.URLEncoding.DecodeString(s); err != nil {
				return bad(err)
			}
		}
		return protoreflect.ValueOfBytes(b), nil
	case protoreflect.BoolKind:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfBool(b), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfInt32(int32(n)), nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfInt64(n), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfUint32(uint32(n)), nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfUint64(n), nil
	case protoreflect.FloatKind:
		n, err := strconv.ParseFloat(s, 32)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfFloat32(float32(n)), nil
	case protoreflect.DoubleKind:
		n, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return bad(err)
		}
		return protoreflect.ValueOfFloat64(n), nil
	case protoreflect.EnumKind:
		if ev := f.Enum().Values().ByName(protoreflect.Name(s)); ev != nil {
			return protoreflect.ValueOfEnum(ev.Number()), nil
		}
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil || f.Enum().Values().ByNumber(protoreflect.EnumNumber(n)) == nil {
			return protoreflect.Value{}, fmt.Errorf("%q is not a value of %s", s, f.Enum().FullName())
		}
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(n)), nil
	}
	return protoreflect.Value{}, fmt.Errorf("type %s cannot be set from a URL", f.Kind())
}
