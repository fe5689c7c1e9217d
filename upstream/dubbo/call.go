package dubbo

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// dubboVersion is the protocol version a request declares; 2.0.2 is what
// Dubbo 2.7 and 3.x consumers send over the dubbo protocol.
const dubboVersion = "2.0.2"

// genericDescriptor is $invoke's parameter types as a JVM descriptor:
// (String method, String[] types, Object[] args).
const genericDescriptor = "Ljava/lang/String;[Ljava/lang/String;[Ljava/lang/Object;"

// Target is one method of a Dubbo service, called generically. It is
// immutable once built, and holds the parts of every request to it that
// never change.
type Target struct {
	Interface, Version, Group, Method string
	Params                            []Param

	prefix []byte // the frame up to the arguments
	attach []byte // the attachments naming the service
}

// NewTarget prepares calls of method on a service.
func NewTarget(iface, version, group, method string, params []Param) (*Target, error) {
	if iface == "" || method == "" {
		return nil, fmt.Errorf("dubbo: a call needs an interface and a method")
	}
	if !isJavaType(iface) || strings.ContainsAny(method, "./ ") {
		return nil, fmt.Errorf("dubbo: %q.%q is not a Java interface and method name", iface, method)
	}
	t := &Target{Interface: iface, Version: version, Group: group, Method: method, Params: params}
	b := appendHeader(nil, flagRequest|flagTwoWay, 0, 0)
	b = appendStr(b, dubboVersion)
	b = appendStr(b, iface)
	b = appendStr(b, version)
	b = appendStr(b, "$invoke")
	b = appendStr(b, genericDescriptor)
	b = appendStr(b, method)
	b = appendTypedListStart(b, "[string", len(params))
	for _, p := range params {
		b = appendStr(b, p.Type)
	}
	t.prefix = appendTypedListStart(b, "[object", len(params))

	a := []byte{mapStart}
	for _, kv := range [][2]string{{"path", iface}, {"interface", iface}, {"version", version}, {"group", group}, {"generic", "true"}} {
		if kv[1] != "" {
			a = appendStr(a, kv[0])
			a = appendStr(a, kv[1])
		}
	}
	t.attach = a
	return t, nil
}

// Call is one generic invocation: the request frame a route step builds
// (Begin, the arguments through Params, then Attachments and Attach), and
// once made, the provider's answer.
type Call struct {
	// Frame is the request being built; arguments are appended to it.
	Frame []byte
	fixed int // the frame's length up to the per-attempt attachments

	// The answer, once made.
	Status    byte   // the frame's status (StatusOK when the provider answered)
	Result    []byte // the result as JSON ("null" for none), when no exception
	Exception string // the exception's class, when the provider threw
	Message   string // the exception's or the error status's message
	body      []byte // the answer's body as read
	refs      []span // the decoder's, kept for the next answer
}

// Begin starts the request for t, keeping the call's buffers.
func (c *Call) Begin(t *Target) {
	*c = Call{Frame: append(c.Frame[:0], t.prefix...), Result: c.Result[:0], body: c.body[:0], refs: c.refs[:0]}
}

// Attachments ends the arguments and starts the attachments with those
// naming the service.
func (c *Call) Attachments(t *Target) {
	c.Frame = append(c.Frame, t.attach...)
	c.fixed = len(c.Frame)
}

// Rewind drops what an earlier attempt attached after Attachments, and
// its answer, for another attempt.
func (c *Call) Rewind() {
	c.Frame = c.Frame[:c.fixed]
	c.Status, c.Result, c.Exception, c.Message = 0, c.Result[:0], "", ""
}

// Attach adds an attachment (after Attachments).
func (c *Call) Attach(key, value string) {
	c.Frame = appendStr(c.Frame, key)
	c.Frame = appendStr(c.Frame, value)
}

// AttachBytes adds an attachment whose value is in a byte slice.
func (c *Call) AttachBytes(key string, value []byte) {
	c.Frame = appendStr(c.Frame, key)
	c.Frame = appendString(c.Frame, value)
}

// seal ends the attachments and the frame.
func (c *Call) seal(timeout int64) {
	var num [20]byte
	c.AttachBytes("timeout", strconv.AppendInt(num[:0], timeout, 10))
	c.Frame = append(c.Frame, endMark)
	finishFrame(c.Frame, 0)
}

// Response body flags: what follows the flag.
const (
	respException            = 0
	respValue                = 1
	respNull                 = 2
	respExceptionAttachments = 3
	respValueAttachments     = 4
	respNullAttachments      = 5
)

// decodeAnswer reads the answer body: the result as JSON, or the
// exception's class and message; an error status's message.
func (c *Call) decodeAnswer(status byte, body []byte) error {
	c.Status = status
	r := newDecoder(body, c.Result[:0])
	r.refs = c.refs[:0]
	defer func() {
		if cap(r.refs) <= 1024 {
			c.refs = r.refs[:0]
		}
	}()
	if status != StatusOK {
		tag, err := r.byte()
		if err == nil && isStringTag(tag) {
			err = r.stringJSON(tag)
		}
		if err == nil {
			_ = json.Unmarshal(r.out, &c.Message)
		}
		c.Result = r.out[:0]
		return nil
	}
	flag, err := r.readInt()
	if err != nil {
		return err
	}
	switch flag {
	case respNull, respNullAttachments:
		c.Result = append(r.out, "null"...)
		return nil
	case respValue, respValueAttachments:
		err = r.value()
		c.Result = r.out
		return err
	case respException, respExceptionAttachments:
		if err = r.value(); err != nil {
			return err
		}
		c.Exception = r.topClass
		if c.Exception == "" {
			c.Exception = "java.lang.Throwable"
		}
		if m := r.message; m.end > m.start {
			_ = json.Unmarshal(r.out[m.start:m.end], &c.Message)
		}
		c.Result = r.out[:0]
		return nil
	}
	return fmt.Errorf("dubbo: unknown response flag %d", flag)
}
