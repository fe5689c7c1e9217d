// Command grpcupstream is the bench's gRPC backend: the test order service
// (shop.v1.Orders, internal/testutil/grpcorders) on -listen, h2c.
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
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	s, err := grpcorders.Serve(ln)
	if err != nil {
		log.Fatal(err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	s.Stop()
}
