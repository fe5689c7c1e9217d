package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/internal/ascii"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// gRPC backends. A service with protocol grpc is called over HTTP/2 —
// cleartext (h2c) or TLS — by grpc-go: one multiplexed connection per
// instance and credentials, dialled on first use and redialled by grpc-go
// when it breaks. A call's deadline is the request's upstream budget
// (grpc-timeout on the wire), and its status becomes the client's HTTP
// status (GRPCStatus); statuses that map to 5xx count against the
// instance's health and the breakers like any 5xx answer.

// grpcConns are an instance's gRPC connections, by credentials ("" for
// h2c).
type grpcConns struct {
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

// GRPCTLS is how a service reaches its gRPC instances over TLS.
type GRPCTLS struct {
	Config *tls.Config
	Key    string // tells configurations apart (their files and name)
}

func (in *Instance) grpcConn(t *GRPCTLS) (*grpc.ClientConn, error) {
	key := ""
	creds := insecure.NewCredentials()
	if t != nil {
		key, creds = "tls|"+t.Key, credentials.NewTLS(t.Config)
	}
	g := &in.grpc
	g.mu.Lock()
	defer g.mu.Unlock()
	if cc := g.conns[key]; cc != nil {
		return cc, nil
	}
	cc, err := grpc.NewClient("passthrough:///"+in.Addr,
		grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(grpcConnectParams(in.pool.Connect)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(in.pool.MaxResponseBytes)),
		grpc.WithUserAgent("tollgate"))
	if err != nil {
		return nil, err
	}
	if g.conns == nil {
		g.conns = make(map[string]*grpc.ClientConn)
	}
	g.conns[key] = cc
	return cc, nil
}

// grpcCloseGrace is how long a dropped instance's gRPC connections stay
// open for the calls still running on them: closing a connection cancels
// its calls, where closing an idle HTTP connection cuts none.
const grpcCloseGrace = 30 * time.Second

// closeGRPC closes the instance's gRPC connections once the calls running
// on them had their time.
func (in *Instance) closeGRPC() {
	for i := range in.grpcLoops {
		if cc := in.grpcLoops[i].Swap(nil); cc != nil {
			time.AfterFunc(grpcCloseGrace, cc.close)
		}
	}
	g := &in.grpc
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, cc := range g.conns {
		time.AfterFunc(grpcCloseGrace, func() { _ = cc.Close() })
		delete(g.conns, k)
	}
}

// grpcProbeConn is one of the instance's gRPC connections, nil when it is
// not called over gRPC. An instance called only on the loops (h2c) gets
// one for its probes.
func (in *Instance) grpcProbeConn() *grpc.ClientConn {
	g := &in.grpc
	g.mu.Lock()
	for _, cc := range g.conns {
		g.mu.Unlock()
		return cc
	}
	g.mu.Unlock()
	if !in.grpcOnLoops.Load() {
		return nil
	}
	cc, err := in.grpcConn(nil)
	if err != nil {
		return nil
	}
	return cc
}

// probeGRPC asks the standard health service (grpc.health.v1.Health/Check,
// for the whole server). A server that answers it SERVING, or answers
// anything but NOT_SERVING — UNIMPLEMENTED included: it speaks gRPC and
// is up — is healthy; one that cannot be reached in time is not.
func (in *Instance) probeGRPC(cc *grpc.ClientConn) bool {
	ctx, cancel := context.WithTimeout(context.Background(), in.health.cfg.Timeout)
	defer cancel()
	var req, reply []byte
	err := cc.Invoke(ctx, "/grpc.health.v1.Health/Check", &req, &reply, forceRaw)
	switch status.Code(err) {
	case codes.OK:
		// HealthCheckResponse: field 1, the serving status; 2 is NOT_SERVING.
		return !(len(reply) >= 2 && reply[0] == 0x08 && reply[1] == 2)
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return false
	}
	return true
}

// rawCodec passes messages through as the bytes they already are: the
// route's grpc step serialized the request, and it reads the reply.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.(*[]byte); ok {
		return *b, nil
	}
	return nil, errors.New("grpc: raw codec given a non-byte message")
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	if b, ok := v.(*[]byte); ok {
		*b = append((*b)[:0], data...)
		return nil
	}
	return errors.New("grpc: raw codec given a non-byte message")
}

var forceRaw = grpc.ForceCodec(rawCodec{})

// errGRPCTimeout is a call the deadline ended: answered as any upstream
// timeout (504), and not retried.
var errGRPCTimeout = timeoutError{}

type timeoutError struct{}

func (timeoutError) Error() string   { return "grpc: deadline exceeded" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// grpcExchange makes the request's gRPC call to in: the one a grpc step
// built, or the client's own (pass-through, grpc_passthrough.go). A status
// from the backend is an answer (written here, mapped to HTTP); a call
// that ran out of time is an error, as for HTTP.
func (in *Instance) grpcExchange(c *pipeline.Ctx, deadline time.Time, t *GRPCTLS) error {
	call := GRPCCallOf(c)
	if call == nil {
		return in.passThrough(c, deadline, t)
	}
	code, msg, err := in.grpcUnary(c, call, deadline, t)
	if err != nil {
		return err
	}
	call.Done, call.Code, call.Message = true, int(code), msg
	if code != codes.OK {
		writeGRPCStatus(c, code, msg)
		return nil
	}
	// The route's grpc step writes the answer from the reply.
	c.Resp.SetStatusCode(fasthttp.StatusOK)
	return nil
}

// grpcUnary makes a grpc step's call: on the request's loop when it can
// be made there (grpcloop.go), else through grpc-go. err is a deadline
// that passed.
func (in *Instance) grpcUnary(c *pipeline.Ctx, call *GRPCCall, deadline time.Time, t *GRPCTLS) (codes.Code, string, error) {
	r, ok, err := in.grpcOnLoop(c, call.Method, call.Request, deadline, false, t)
	if ok {
		call.Reply = append(call.Reply[:0], r.reply...)
		return r.code, r.message, err
	}
	cc, err := in.grpcConn(t)
	if err != nil {
		return 0, "", err
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	ctx = metadata.NewOutgoingContext(ctx, outgoingMetadata(c))
	c.Block(pipeline.BlockingFunc(func() { // grpc-go waits on its own goroutines
		err = cc.Invoke(ctx, call.Method, &call.Request, &call.Reply, forceRaw)
	}))
	cancel()
	st := status.Convert(err)
	if st.Code() == codes.DeadlineExceeded && !time.Now().Before(deadline) {
		return 0, "", errGRPCTimeout
	}
	return st.Code(), st.Message(), nil
}

// outgoingMetadata is the request's forwarding fields (identity, trace,
// X-Forwarded-*) as gRPC metadata: the ones gRPC reserves or HTTP/2
// forbids are left out, as are values it cannot carry.
func outgoingMetadata(c *pipeline.Ctx) metadata.MD {
	l := &c.Fields
	md := make(metadata.MD, l.Len())
	for i := range l.Len() {
		name, value := l.Field(i)
		if !grpcMetadataName(name) || !printable(value) {
			continue
		}
		k := strings.ToLower(string(name))
		md[k] = append(md[k], string(value))
	}
	return md
}

var notMetadata = []string{"host", "content-length", "content-type", "content-encoding", "connection", "keep-alive",
	"proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "user-agent", "accept-encoding"}

func grpcMetadataName(name []byte) bool {
	if len(name) == 0 || name[0] == ':' || ascii.HasPrefixFold(name, "grpc-") {
		return false
	}
	for _, n := range notMetadata {
		if ascii.EqualFold(name, n) {
			return false
		}
	}
	for _, b := range name {
		lb := ascii.Lower(b)
		if !(lb >= 'a' && lb <= 'z' || b >= '0' && b <= '9' || b == '-' || b == '_' || b == '.') {
			return false
		}
	}
	return true
}

func printable(v []byte) bool {
	for _, b := range v {
		if b < 0x20 || b > 0x7e {
			return false
		}
	}
	return true
}

// grpcHTTP maps gRPC status codes to HTTP statuses (the mapping
// grpc-gateway and Envoy's transcoder use).
var grpcHTTP = [...]int{
	codes.OK:                 200,
	codes.Canceled:           499,
	codes.Unknown:            500,
	codes.InvalidArgument:    400,
	codes.DeadlineExceeded:   504,
	codes.NotFound:           404,
	codes.AlreadyExists:      409,
	codes.PermissionDenied:   403,
	codes.ResourceExhausted:  429,
	codes.FailedPrecondition: 400,
	codes.Aborted:            409,
	codes.OutOfRange:         400,
	codes.Unimplemented:      501,
	codes.Internal:           500,
	codes.Unavailable:        503,
	codes.DataLoss:           500,
	codes.Unauthenticated:    401,
}

// GRPCStatus is the HTTP status a gRPC status code is answered with.
func GRPCStatus(code codes.Code) int {
	if int(code) < len(grpcHTTP) {
		return grpcHTTP[code]
	}
	return 500
}

// grpcNames are the status codes' names as the gRPC specification writes
// them.
var grpcNames = [...]string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
	"UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}

// GRPCCodeName names a status code ("NOT_FOUND").
func GRPCCodeName(code codes.Code) string {
	if int(code) < len(grpcNames) {
		return grpcNames[code]
	}
	return "CODE_" + strconv.Itoa(int(code))
}

// writeGRPCStatus answers a call that ended with a status: the mapped
// HTTP status and the gateway's error shape, with the gRPC status named.
func writeGRPCStatus(c *pipeline.Ctx, code codes.Code, msg string) {
	if c.Decision == "" {
		c.Decision = "upstream gRPC status " + GRPCCodeName(code)
	}
	pipeline.WriteError(c, GRPCStatus(code), msg, "grpc_status", GRPCCodeName(code))
}

func grpcConnectParams(connect time.Duration) grpc.ConnectParams {
	p := grpc.ConnectParams{MinConnectTimeout: connect}
	p.Backoff.BaseDelay = 100 * time.Millisecond
	p.Backoff.Multiplier = 1.6
	p.Backoff.Jitter = 0.2
	p.Backoff.MaxDelay = 5 * time.Second
	return p
}
