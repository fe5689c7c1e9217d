package otlp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
)

// exportMethod is the OTLP trace service's one method.
const exportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// GRPCSender makes unary Export calls to an OTLP/gRPC endpoint, over
// HTTP/2 in cleartext (h2c) or over TLS.
type GRPCSender struct {
	conn *grpc.ClientConn
	md   metadata.MD
}

// NewGRPC returns a sender to endpoint: host:port or http://host:port in
// cleartext, https://host:port over TLS; tlsc (when not nil) makes any of
// them TLS with those settings.
func NewGRPC(endpoint string, headers map[string]string, tlsc *tls.Config) (*GRPCSender, error) {
	target := endpoint
	switch {
	case strings.HasPrefix(endpoint, "https://"):
		target = strings.TrimPrefix(endpoint, "https://")
		if tlsc == nil {
			tlsc = &tls.Config{MinVersion: tls.VersionTLS12}
		}
	case strings.HasPrefix(endpoint, "http://"):
		target = strings.TrimPrefix(endpoint, "http://")
	}
	target = strings.TrimSuffix(target, "/")
	if target == "" || strings.ContainsAny(target, "/ ") {
		return nil, fmt.Errorf("endpoint %q: want host:port, http://host:port or https://host:port", endpoint)
	}
	creds := insecure.NewCredentials()
	if tlsc != nil {
		creds = credentials.NewTLS(tlsc)
	}
	conn, err := grpc.NewClient("passthrough:///"+target,
		grpc.WithTransportCredentials(creds),
		// A backend that comes back is found within seconds: grpc-go's
		// default backoff grows to two minutes between dials.
		grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: 5 * time.Second,
			Backoff: backoff.Config{BaseDelay: 250 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second}}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxAnswerBytes)),
		grpc.WithUserAgent("tollgate"))
	if err != nil {
		return nil, err
	}
	md := metadata.MD{}
	for k, v := range headers {
		md.Set(strings.ToLower(k), v)
	}
	return &GRPCSender{conn: conn, md: md}, nil
}

// Send implements Sender.
func (s *GRPCSender) Send(ctx context.Context, body []byte) error {
	if len(s.md) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, s.md)
	}
	var reply []byte
	err := s.conn.Invoke(ctx, exportMethod, &body, &reply, grpc.ForceCodec(rawCodec{}))
	if err == nil {
		return nil
	}
	st := status.Convert(err)
	err = fmt.Errorf("export call: %s: %s", st.Code(), printable([]byte(st.Message()), 200))
	delay, asked := retryDelay(st)
	switch st.Code() {
	case codes.Canceled, codes.DeadlineExceeded, codes.Aborted, codes.OutOfRange, codes.Unavailable, codes.DataLoss:
		return &RetryableError{Err: err, After: delay}
	case codes.ResourceExhausted:
		// Retried only when the server says when: otherwise the limit
		// may be for good (a message too large).
		if asked {
			return &RetryableError{Err: err, After: delay}
		}
	}
	return err
}

// Close closes the connection.
func (s *GRPCSender) Close() { _ = s.conn.Close() }

// retryInfoType is google.rpc.RetryInfo's type URL in a status's details.
const retryInfoType = "type.googleapis.com/google.rpc.RetryInfo"

// retryDelay reads the RetryInfo a status carries, if any: its
// retry_delay (a google.protobuf.Duration).
func retryDelay(st *status.Status) (time.Duration, bool) {
	for _, d := range st.Proto().GetDetails() {
		if d.GetTypeUrl() != retryInfoType {
			continue
		}
		dur, ok := field(d.GetValue(), 1)
		if !ok {
			return 0, true
		}
		secs, _ := varintField(dur, 1)
		nanos, _ := varintField(dur, 2)
		delay := time.Duration(secs)*time.Second + time.Duration(int32(nanos))
		return max(delay, 0), true
	}
	return 0, false
}

// field returns the bytes of the first length-delimited field num of msg.
func field(msg []byte, num protowire.Number) ([]byte, bool) {
	for len(msg) > 0 {
		n, typ, k := protowire.ConsumeTag(msg)
		if k < 0 {
			return nil, false
		}
		msg = msg[k:]
		if n == num && typ == protowire.BytesType {
			v, k := protowire.ConsumeBytes(msg)
			return v, k >= 0
		}
		k = protowire.ConsumeFieldValue(n, typ, msg)
		if k < 0 {
			return nil, false
		}
		msg = msg[k:]
	}
	return nil, false
}

// varintField returns the first varint field num of msg.
func varintField(msg []byte, num protowire.Number) (int64, bool) {
	for len(msg) > 0 {
		n, typ, k := protowire.ConsumeTag(msg)
		if k < 0 {
			return 0, false
		}
		msg = msg[k:]
		if n == num && typ == protowire.VarintType {
			v, k := protowire.ConsumeVarint(msg)
			return int64(v), k >= 0
		}
		k = protowire.ConsumeFieldValue(n, typ, msg)
		if k < 0 {
			return 0, false
		}
		msg = msg[k:]
	}
	return 0, false
}

// rawCodec passes the request through as the bytes it already is, and
// keeps the reply's (an ExportTraceServiceResponse, only ever looked at
// for its size).
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.(*[]byte); ok {
		return *b, nil
	}
	return nil, errors.New("otlp: raw codec given a non-byte message")
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	if b, ok := v.(*[]byte); ok {
		*b = append((*b)[:0], data...)
		return nil
	}
	return errors.New("otlp: raw codec given a non-byte message")
}
