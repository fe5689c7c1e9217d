package codec

import (
	"bytes"

	"github.com/valyala/fasthttp"
)

// Internal names the header and query-parameter prefixes reserved for
// callers inside the company. Client requests carrying them are stripped so
// nobody outside can pose as an internal caller.
type Internal struct {
	HeaderPrefixes [][]byte // e.g. "X-Internal-"
	QueryPrefixes  [][]byte // e.g. "internal_"
}

// Strip removes the reserved headers and query parameters from req. Matching
// is case-insensitive; query keys are compared after percent-decoding, so
// "%69nternal_x" is caught too.
func (in *Internal) Strip(req *fasthttp.Request) {
	if len(in.HeaderPrefixes) > 0 {
		for {
			name := in.findHeader(&req.Header)
			if name == nil {
				break
			}
			req.Header.DelBytes(name)
		}
	}
	if len(in.QueryPrefixes) > 0 && len(req.URI().QueryString()) > 0 {
		args := req.URI().QueryArgs()
		for {
			key := in.findArg(args)
			if key == nil {
				break
			}
			args.DelBytes(key)
		}
	}
}

func (in *Internal) findHeader(h *fasthttp.RequestHeader) []byte {
	for k := range h.All() {
		if hasAnyPrefixFold(k, in.HeaderPrefixes) {
			return k
		}
	}
	return nil
}

func (in *Internal) findArg(a *fasthttp.Args) []byte {
	for k := range a.All() {
		if hasAnyPrefixFold(k, in.QueryPrefixes) {
			return k
		}
	}
	return nil
}

func hasAnyPrefixFold(b []byte, prefixes [][]byte) bool {
	for _, p := range prefixes {
		if len(b) >= len(p) && bytes.EqualFold(b[:len(p)], p) {
			return true
		}
	}
	return false
}
