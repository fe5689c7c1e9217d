package h2

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
)

// A gRPC client reads a call's outcome from grpc-status, not from the HTTP
// status: an answer the gateway made itself (a refused signature, a rate
// limit, an open breaker, no route) is turned into a gRPC error for it,
// with the status gRPC's HTTP mapping gives and the answer's message.

// isGRPC reports a gRPC request (application/grpc, +proto, +json, …).
func isGRPC(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	return ct == "application/grpc" || strings.HasPrefix(ct, "application/grpc+") || strings.HasPrefix(ct, "application/grpc;")
}

// grpcCodeFor maps an HTTP status the gateway answered to a gRPC status
// code: gRPC's own mapping for HTTP statuses, and the limiters' statuses
// (911, 919 and 429) as RESOURCE_EXHAUSTED.
func grpcCodeFor(status int) int {
	switch status {
	case 400:
		return 3 // INVALID_ARGUMENT
	case 401:
		return 16 // UNAUTHENTICATED
	case 403:
		return 7 // PERMISSION_DENIED
	case 404:
		return 12 // UNIMPLEMENTED: no route is no such method
	case 408, 504:
		return 4 // DEADLINE_EXCEEDED
	case 413, 429, 911, 919:
		return 8 // RESOURCE_EXHAUSTED
	case 502, 503:
		return 14 // UNAVAILABLE
	}
	return 2 // UNKNOWN
}

// grpcify makes resp, an answer that is not gRPC, a gRPC error.
func grpcify(resp *fasthttp.Response) {
	status := resp.StatusCode()
	msg := http.StatusText(status)
	var shaped struct {
		Message string `json:"message"`
	}
	// Only a small body already in memory is read for its message (the
	// gateway's own refusals are): a streamed backend answer is not
	// pulled in whole for it.
	if !resp.IsBodyStream() && len(resp.Body()) <= 4096 && json.Unmarshal(resp.Body(), &shaped) == nil && shaped.Message != "" {
		msg = shaped.Message
	}
	keep := make([][2]string, 0, 4)
	for _, k := range []string{"Retry-After", "X-Request-Id", "Traceparent", "X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"} {
		if v := resp.Header.Peek(k); len(v) > 0 {
			keep = append(keep, [2]string{k, string(v)})
		}
	}
	resp.Reset()
	resp.Header.SetNoDefaultContentType(true)
	resp.SetStatusCode(fasthttp.StatusOK)
	resp.Header.SetContentType("application/grpc")
	for _, kv := range keep {
		resp.Header.Set(kv[0], kv[1])
	}
	_ = resp.Header.AddTrailer("Grpc-Status")
	resp.Header.Set("Grpc-Status", strconv.Itoa(grpcCodeFor(status)))
	_ = resp.Header.AddTrailer("Grpc-Message")
	resp.Header.Set("Grpc-Message", url.PathEscape(msg))
}

// isGRPCAnswer reports an answer already in gRPC's shape.
func isGRPCAnswer(resp *fasthttp.Response) bool {
	ct := string(resp.Header.ContentType())
	return ct == "application/grpc" || strings.HasPrefix(ct, "application/grpc+")
}
