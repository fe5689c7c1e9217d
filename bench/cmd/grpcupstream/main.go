// Command grpcupstream is the bench's gRPC backend: the test order service
// (shop.v1.Orders, internal/testutil/grpcorders) on -listen, h2c. With
// -engine lean (the default) it is served by this command's own lean
// HTTP/2 server (lean.go), which costs about what the HTTP bench upstream
// costs per request; with -engine grpc-go, by grpc-go through dynamicpb,
// as the tests serve it.
package main

import (
	"flag"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/tollgate/tollgate/internal/testutil/grpcorders"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:19301", "address to serve gRPC on (h2c)")
	engine := flag.String("engine", "lean", "lean (this command's HTTP/2 server) or grpc-go")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	switch *engine {
	case "lean":
		go func() { log.Fatal(serveLean(ln)) }()
		<-sig
	case "grpc-go":
		s, err := grpcorders.Serve(ln)
		if err != nil {
			log.Fatal(err)
		}
		<-sig
		s.Stop()
	default:
		log.Fatalf("grpcupstream: -engine %q: want lean or grpc-go", *engine)
	}
}
