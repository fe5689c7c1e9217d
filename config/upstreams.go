package config

import (
	"fmt"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/pipeline"
)

// upstreamsOf returns the services the snapshot's sections shared; none
// when no package of the binary owns the services section.
func upstreamsOf(env *pipeline.Env) pipeline.Upstreams {
	if u, ok := pipeline.UpstreamsKey.Get(env); ok && u != nil {
		return u
	}
	return noUpstreams{}
}

// noUpstreams defines no service: every route that forwards is refused
// for naming one that is not defined.
type noUpstreams struct{}

func (noUpstreams) Has(string) bool                                  { return false }
func (noUpstreams) Action(string, map[string]string) pipeline.Action { return nil }
func (noUpstreams) Protocol(string) string                           { return "" }
func (noUpstreams) Forwarding(*codec.HeaderPolicy) pipeline.Filter   { return nil }

// checkServiceRefs refuses a default service or a fallback that names no
// defined service.
func checkServiceRefs(f *File, u pipeline.Upstreams) error {
	if f.DefaultService != "" && !u.Has(f.DefaultService) {
		return f.errorAt("default_service", fmt.Sprintf("default_service %q is not a defined service", f.DefaultService))
	}
	if u.Protocol(f.DefaultService) == "dubbo" {
		return f.errorAt("default_service", fmt.Sprintf("default_service %q speaks Dubbo, which a route reaches only through its dubbo step", f.DefaultService))
	}
	for _, fb := range f.Fallbacks {
		if !u.Has(fb.Service) {
			return f.errorAt("fallbacks", fmt.Sprintf("fallbacks: service %q is not defined", fb.Service))
		}
		if u.Protocol(fb.Service) == "dubbo" {
			return f.errorAt("fallbacks", fmt.Sprintf("fallbacks: service %q speaks Dubbo, which a route reaches only through its dubbo step", fb.Service))
		}
		if fb.Weight < 0 {
			return f.errorAt("fallbacks", fmt.Sprintf("fallbacks: weight of %q must not be negative", fb.Service))
		}
	}
	return nil
}

// errorAt is an Error about the top-level setting key, placed at the
// first value under it its message quotes (placeByQuote), else at the
// setting; unplaced when the file did not write it.
func (f *File) errorAt(key, msg string) *Error {
	if f.doc == nil {
		return &Error{Msg: msg}
	}
	n := mapValue(f.doc, key)
	if n == nil {
		return &Error{Msg: msg}
	}
	line, col := placeByQuote(n, msg)
	return &Error{Line: line, Col: col, Msg: msg}
}
