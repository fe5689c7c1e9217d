package transcode

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// httpRuleField is the google.api.http method option's field number
// (google/api/annotations.proto). Descriptor sets carry it as an unknown
// field of MethodOptions, or as a known extension when a linked-in
// package (etcd's client does) registers the annotations; the options are
// written back to wire form and the field read from the bytes, so either
// way reads the same and no generated googleapis code is needed.
const httpRuleField = 72295728

// httpRule is the part of a google.api.HttpRule the gateway uses.
type httpRule struct {
	Method       string // GET, POST, … ("" when no rule)
	Path         *template
	Body         string // "*", a field name, or "" (no body)
	ResponseBody string
}

// readHTTPRule reads the method's google.api.http option; ok is false when
// it has none.
func readHTTPRule(m protoreflect.MethodDescriptor) (r httpRule, ok bool, err error) {
	opts := m.Options()
	if opts == nil {
		return r, false, nil
	}
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(opts)
	if err != nil {
		return r, false, fmt.Errorf("method options: %v", err)
	}
	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 {
			return r, false, errors.New("malformed method options")
		}
		raw = raw[n:]
		if num == httpRuleField && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(raw)
			if n < 0 {
				return r, false, errors.New("malformed google.api.http option")
			}
			r, err = parseHTTPRule(v)
			return r, err == nil, err
		}
		n = protowire.ConsumeFieldValue(num, typ, raw)
		if n < 0 {
			return r, false, errors.New("malformed method options")
		}
		raw = raw[n:]
	}
	return r, false, nil
}

// parseHTTPRule decodes a serialized google.api.HttpRule (additional
// bindings are not read: a route binds one path).
func parseHTTPRule(b []byte) (httpRule, error) {
	var r httpRule
	var path string
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return r, errors.New("malformed google.api.http option")
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return r, errors.New("malformed google.api.http option")
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return r, errors.New("malformed google.api.http option")
		}
		b = b[n:]
		switch num {
		case 2, 3, 4, 5, 6: // get, put, post, delete, patch
			r.Method = [...]string{2: "GET", 3: "PUT", 4: "POST", 5: "DELETE", 6: "PATCH"}[num]
			path = string(v)
		case 8: // custom {kind, path}
			kind, p, err := parseCustom(v)
			if err != nil {
				return r, err
			}
			r.Method, path = strings.ToUpper(kind), p
		case 7:
			r.Body = string(v)
		case 12:
			r.ResponseBody = string(v)
		}
	}
	if path == "" {
		return r, errors.New("google.api.http option without a path")
	}
	t, err := parseTemplate(path)
	if err != nil {
		return r, fmt.Errorf("google.api.http path %q: %v", path, err)
	}
	r.Path = t
	return r, nil
}

func parseCustom(b []byte) (kind, path string, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return "", "", errors.New("malformed custom pattern")
		}
		b = b[n:]
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return "", "", errors.New("malformed custom pattern")
		}
		b = b[n:]
		switch num {
		case 1:
			kind = string(v)
		case 2:
			path = string(v)
		}
	}
	return kind, path, nil
}

// template is a google.api.http path template: literal segments,
// wildcards (* one segment, ** the rest) and variables binding a field to
// one or more segments ("/v1/{name=shelves/*/books/*}", "/v1/orders/{id}").
type template struct {
	segs []segment
	vars []variable
	verb string // ":verb" suffix, without the colon
}

type segment struct {
	literal string // "" for a wildcard
	multi   bool   // "**"
}

// variable binds Field to the segments [start, end) (end -1: to the end).
type variable struct {
	Field      string
	start, end int
}

func parseTemplate(p string) (*template, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, errors.New("must start with /")
	}
	t := &template{}
	rest := p[1:]
	if i := strings.LastIndexByte(rest, ':'); i >= 0 && !strings.ContainsAny(rest[i:], "/}") {
		t.verb, rest = rest[i+1:], rest[:i]
	}
	for rest != "" {
		if rest[0] == '{' {
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				return nil, errors.New("unclosed {")
			}
			field, pattern, hasPattern := strings.Cut(rest[1:end], "=")
			if field == "" {
				return nil, errors.New("variable without a field")
			}
			if !hasPattern {
				pattern = "*"
			}
			v := variable{Field: field, start: len(t.segs)}
			for _, s := range strings.Split(pattern, "/") {
				if err := t.addSeg(s); err != nil {
					return nil, err
				}
			}
			v.end = len(t.segs)
			if t.segs[len(t.segs)-1].multi {
				v.end = -1
			}
			t.vars = append(t.vars, v)
			rest = rest[end+1:]
		} else {
			seg, after, _ := strings.Cut(rest, "/")
			if strings.ContainsAny(seg, "{}") {
				return nil, fmt.Errorf("segment %q mixes a literal and a variable", seg)
			}
			if err := t.addSeg(seg); err != nil {
				return nil, err
			}
			rest = after
			continue
		}
		if rest == "" {
			break
		}
		if rest[0] != '/' {
			return nil, errors.New("a variable must end its segment")
		}
		rest = rest[1:]
	}
	for i, s := range t.segs {
		if s.multi && i != len(t.segs)-1 {
			return nil, errors.New("** must be the last segment")
		}
	}
	return t, nil
}

func (t *template) addSeg(s string) error {
	switch s {
	case "":
		return errors.New("empty segment")
	case "*":
		t.segs = append(t.segs, segment{})
	case "**":
		t.segs = append(t.segs, segment{multi: true})
	default:
		t.segs = append(t.segs, segment{literal: s})
	}
	return nil
}

// match matches a request path against t and calls bind for each
// variable with its value, percent-decoded. It reports false when the path
// is not one of t's.
func (t *template) match(path string, bind func(field, value string) error) (bool, error) {
	if !strings.HasPrefix(path, "/") {
		return false, nil
	}
	p := path[1:]
	if t.verb != "" {
		if !strings.HasSuffix(p, t.verb) || len(p) <= len(t.verb) || p[len(p)-len(t.verb)-1] != ':' {
			return false, nil
		}
		p = p[:len(p)-len(t.verb)-1]
	}
	var small [32]string
	parts := splitPath(p, small[:0])
	n := len(t.segs)
	multi := n > 0 && t.segs[n-1].multi
	if len(parts) < n || (!multi && len(parts) != n) {
		return false, nil
	}
	for i, s := range t.segs {
		if s.multi {
			break
		}
		if s.literal != "" && parts[i] != s.literal {
			return false, nil
		}
	}
	for _, v := range t.vars {
		end := v.end
		if end < 0 {
			end = len(parts)
		}
		if end-v.start == 1 && parts[v.start] != "" && !strings.Contains(parts[v.start], "%") {
			if err := bind(v.Field, parts[v.start]); err != nil {
				return true, err
			}
			continue
		}
		// Decoded segment by segment: an encoded '/' is not a separator
		// the route's match saw, so it is refused rather than made one.
		segs := make([]string, 0, end-v.start)
		for _, part := range parts[v.start:end] {
			if part == "" {
				// "/v1/orders/" does not name an order: not found, as
				// grpc-gateway answers, rather than a call with an
				// empty id.
				return false, nil
			}
			seg, err := url.PathUnescape(part)
			if err != nil {
				return true, fmt.Errorf("path variable %s: %v", v.Field, err)
			}
			if strings.Contains(seg, "/") {
				return true, fmt.Errorf("path variable %s: an encoded '/' in a segment", v.Field)
			}
			segs = append(segs, seg)
		}
		if err := bind(v.Field, strings.Join(segs, "/")); err != nil {
			return true, err
		}
	}
	return true, nil
}

// splitPath splits p at '/' into parts, appended to into (on the caller's
// stack for the usual few segments).
func splitPath(p string, into []string) []string {
	for {
		i := strings.IndexByte(p, '/')
		if i < 0 {
			return append(into, p)
		}
		into = append(into, p[:i])
		p = p[i+1:]
	}
}
