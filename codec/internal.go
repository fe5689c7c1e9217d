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
// "%69nternal_x" is caught too. Headers are found among the fields as the
// client sent them (req must come from a parser, as transports give it).
func (in *Internal) Strip(req *fasthttp.Request) {
	if len(in.HeaderPrefixes) > 0 {
		// One pass over the fields as received. All would make fasthttp
		// parse Cookie and later re-serialize it, changing what the
		// upstream gets. Deleting while scanning is safe here: the scan
		// reads the raw header bytes, the deletion edits the parsed list.
		for k := range req.Header.AllInOrder() {
			if hasAnyPrefixFold(k, in.HeaderPrefixes) {
				req.Header.DelBytes(k)
			}
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
