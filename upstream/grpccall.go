package upstream

import "github.com/tollgate/tollgate/pipeline"

// GRPCCall is a unary gRPC call made in place of an HTTP exchange: a
// route's grpc step (package transcode) names the method and puts the
// request message in; a service with protocol grpc makes the call and
// leaves the reply, or the call's status, for the step to turn into the
// client's answer.
type GRPCCall struct {
	// Method is the full method name: "/shop.v1.Orders/Create".
	Method string
	// Request is the request message, serialized.
	Request []byte
	// Reply is the reply message, serialized, once Done with Code 0.
	Reply []byte
	// Code and Message are the call's status once Done.
	Code    int
	Message string
	// Done reports that the backend answered (with a reply or a status).
	Done bool
}

// Reset empties the call, keeping its buffers.
func (g *GRPCCall) Reset() {
	*g = GRPCCall{Request: g.Request[:0], Reply: g.Reply[:0]}
}

// grpcCall is the call a transcoding step asks of the request's service
// instead of forwarding the HTTP request; nil when there is none.
var grpcCall = pipeline.NewSlot[*GRPCCall]()

// SetGRPCCall makes call the request's gRPC call: the service makes it
// instead of forwarding the HTTP request. The caller keeps ownership.
func SetGRPCCall(c *pipeline.Ctx, call *GRPCCall) { grpcCall.Set(c, call) }

// GRPCCallOf returns the request's gRPC call, nil when none was set.
func GRPCCallOf(c *pipeline.Ctx) *GRPCCall { return grpcCall.Get(c) }

// TakeGRPCCall returns the request's gRPC call and forgets it, for the
// step that hands it back to its pool.
func TakeGRPCCall(c *pipeline.Ctx) *GRPCCall {
	call := grpcCall.Get(c)
	grpcCall.Clear(c)
	return call
}
