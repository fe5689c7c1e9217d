package upstream

import (
	"context"
	"encoding/binary"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/internal/ascii"
	"github.com/tollgate/tollgate/internal/bytesconv"
	"github.com/tollgate/tollgate/internal/grpcwire"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// gRPC pass-through: a gRPC client's unary call (HTTP/2, application/grpc)
// on a route to a gRPC service without a grpc step goes to the service
// as the same call — routed by its path (/package.Service/Method), through
// the route's filters (auth, limits, …) — and its answer comes back as
// gRPC: the reply framed, the status and the backend's trailers as HTTP/2
// trailers. The deadline is the sooner of the client's grpc-timeout and
// the route's budget. Streaming calls and compressed messages are answered
// UNIMPLEMENTED.

var errNotAGRPCCall = pipeline.NewCanned(fasthttp.StatusUnsupportedMediaType,
	"this route passes gRPC calls through: send application/grpc over HTTP/2")

// passThrough makes the client's gRPC call to in.
func (in *Instance) passThrough(c *pipeline.Ctx, deadline time.Time, t *GRPCTLS) error {
	if !mediaTypeIs(c.Req.Header.ContentType(), "application/grpc") && !ascii.HasPrefixFold(c.Req.Header.ContentType(), "application/grpc+") {
		errNotAGRPCCall.WriteTo(c)
		return nil
	}
	method := bytesconv.B2S(c.Target.Path)
	if !validMethodPath(method) {
		writeGRPCAnswer(c, codes.Unimplemented, "not a gRPC method path", nil, nil, nil)
		return nil
	}
	if c.Req.IsBodyStream() {
		writeGRPCAnswer(c, codes.ResourceExhausted, "request message too large to pass through", nil, nil, nil)
		return nil
	}
	msg, code, why := unaryMessage(c.Req.Body())
	if code != codes.OK {
		writeGRPCAnswer(c, code, why, nil, nil, nil)
		return nil
	}
	if d, ok := grpcwire.ParseTimeout(c.Req.Header.Peek("Grpc-Timeout")); ok {
		if client := time.Now().Add(d); client.Before(deadline) {
			deadline = client
		}
	}
	r, ok, err := in.grpcOnLoop(c, method, msg, deadline, true, t)
	if ok {
		if err != nil {
			return err
		}
		writeGRPCAnswer(c, r.code, r.message, r.reply, r.header, r.trailer)
		c.Outcome.Status = GRPCStatus(r.code)
		return nil
	}
	cc, err := in.grpcConn(t)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	ctx = metadata.NewOutgoingContext(ctx, outgoingMetadata(c))
	var header, trailer metadata.MD
	var reply []byte
	c.Block(pipeline.BlockingFunc(func() {
		err = cc.Invoke(ctx, method, &msg, &reply, forceRaw, grpc.Header(&header), grpc.Trailer(&trailer))
	}))
	cancel()
	st := status.Convert(err)
	if st.Code() == codes.DeadlineExceeded && !time.Now().Before(deadline) {
		return errGRPCTimeout
	}
	writeGRPCAnswer(c, st.Code(), st.Message(), reply, header, trailer)
	// The breakers and the instance's health read the status gRPC's
	// would map to; the client reads HTTP 200 and the trailers.
	c.Outcome.Status = GRPCStatus(st.Code())
	return nil
}

// unaryMessage takes the one message of a unary call's body: a 5-byte
// prefix (compressed flag, length) and the message.
func unaryMessage(body []byte) (msg []byte, code codes.Code, why string) {
	if len(body) < 5 {
		return nil, codes.Internal, "request body is not a gRPC message"
	}
	if body[0] != 0 {
		return nil, codes.Unimplemented, "compressed messages are not passed through"
	}
	n := binary.BigEndian.Uint32(body[1:5])
	if uint64(n) != uint64(len(body)-5) {
		if uint64(n) < uint64(len(body)-5) {
			return nil, codes.Unimplemented, "streaming calls are not passed through"
		}
		return nil, codes.Internal, "request message cut short"
	}
	return body[5:], codes.OK, ""
}

// validMethodPath reports p as /package.Service/Method.
func validMethodPath(p string) bool {
	if len(p) < 4 || p[0] != '/' {
		return false
	}
	svc, m, ok := strings.Cut(p[1:], "/")
	return ok && svc != "" && m != "" && !strings.Contains(m, "/")
}

// writeGRPCAnswer answers as gRPC: HTTP 200, the reply framed when the
// status is OK, the backend's header metadata as fields, and grpc-status,
// grpc-message and its trailer metadata as trailers.
func writeGRPCAnswer(c *pipeline.Ctx, code codes.Code, msg string, reply []byte, header, trailer metadata.MD) {
	r := c.Resp
	r.Reset()
	r.SetStatusCode(fasthttp.StatusOK)
	r.Header.SetContentType("application/grpc")
	for k, vs := range header {
		if passMetadata(k) {
			for _, v := range vs {
				r.Header.Add(k, v)
			}
		}
	}
	if code == codes.OK {
		b := c.Scratch[:0]
		b = append(b, 0, 0, 0, 0, 0)
		binary.BigEndian.PutUint32(b[1:5], uint32(len(reply)))
		b = append(b, reply...)
		r.SetBody(b)
		c.Scratch = b[:0]
	}
	_ = r.Header.AddTrailer("Grpc-Status")
	r.Header.Set("Grpc-Status", strconv.Itoa(int(code)))
	if msg != "" {
		_ = r.Header.AddTrailer("Grpc-Message")
		r.Header.Set("Grpc-Message", percentEncode(msg))
	}
	for k, vs := range trailer {
		if passMetadata(k) {
			_ = r.Header.AddTrailer(k)
			for _, v := range vs {
				r.Header.Add(k, v)
			}
		}
	}
	if code != codes.OK && c.Decision == "" {
		c.Decision = "upstream gRPC status " + GRPCCodeName(code)
	}
}

// passMetadata reports whether a backend's metadata key may go to the
// client: not the fields gRPC and HTTP/2 own.
func passMetadata(k string) bool {
	switch {
	case k == "" || k[0] == ':' || strings.HasPrefix(k, "grpc-"):
		return false
	case k == "content-type" || k == "content-length" || k == "trailer" || k == "te" || k == "connection" || k == "transfer-encoding":
		return false
	}
	return true
}

// percentEncode encodes a grpc-message as the gRPC spec asks (bytes
// outside printable ASCII, and %, percent-encoded).
func percentEncode(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '%' {
			return url.PathEscape(s)
		}
	}
	return s
}
