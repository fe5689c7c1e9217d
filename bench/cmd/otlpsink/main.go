// Command otlpsink is a collector that takes OTLP/gRPC trace exports and
// discards them, for measuring what exporting costs the gateway without
// a tracing backend's own work on the same cores. It answers every
// Export with an empty ExportTraceServiceResponse and, on SIGTERM or
// SIGINT, prints how many exports and bytes it took.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"google.golang.org/grpc"
)

const exportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

var exports, bytes atomic.Int64

type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.(*[]byte); ok {
		return *b, nil
	}
	return nil, errors.New("raw codec given a non-byte message")
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	if b, ok := v.(*[]byte); ok {
		*b = data
		return nil
	}
	return errors.New("raw codec given a non-byte message")
}

// discard takes any call: an Export's request is counted and dropped.
func discard(_ any, stream grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(stream)
	if method != exportMethod {
		return fmt.Errorf("unknown method %s", method)
	}
	var req []byte
	if err := stream.RecvMsg(&req); err != nil {
		return err
	}
	exports.Add(1)
	bytes.Add(int64(len(req)))
	empty := []byte{}
	return stream.SendMsg(&empty)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:4317", "address to take OTLP/gRPC on")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(discard),
		grpc.MaxRecvMsgSize(64<<20))
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		srv.Stop()
	}()
	_ = srv.Serve(ln)
	fmt.Printf("exports=%d bytes=%d\n", exports.Load(), bytes.Load())
}
