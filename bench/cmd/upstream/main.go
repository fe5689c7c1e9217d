// Command upstream is the backend used by the benchmark: it answers every
// request with 200 and a fixed text/plain body. The handler allocates
// nothing per request, so the upstream adds as little noise as possible to
// proxy measurements. GOMAXPROCS is honoured from the environment as usual.
package main

import (
	"errors"
	"flag"
	"log"
	"net"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9100", "address to listen on")
	bodyBytes := flag.Int("body-bytes", 64, "size of the response body in bytes")
	flag.Parse()

	if *bodyBytes < 0 {
		log.Fatalf("upstream: -body-bytes must be >= 0, got %d", *bodyBytes)
	}
	body := makeBody(*bodyBytes)
	contentType := []byte("text/plain")

	handler := func(ctx *fasthttp.RequestCtx) {
		ctx.Response.Header.SetContentTypeBytes(contentType)
		// SetBodyRaw keeps a reference to the shared body instead of copying it.
		ctx.Response.SetBodyRaw(body)
	}

	srv := &fasthttp.Server{
		Handler:               handler,
		Name:                  "bench-upstream",
		ReadTimeout:           60 * time.Second,
		WriteTimeout:          60 * time.Second,
		IdleTimeout:           120 * time.Second,
		Concurrency:           1 << 20,
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
	}
	ln, err := net.Listen("tcp4", *listen)
	if err != nil {
		log.Fatalf("upstream: %v", err)
	}
	log.Printf("upstream: listening on %s, body %d bytes", *listen, *bodyBytes)
	if err := srv.Serve(retryListener{ln}); err != nil {
		log.Fatalf("upstream: %v", err)
	}
}

// retryListener waits and retries when the process runs out of file
// descriptors, instead of letting the server stop for good.
type retryListener struct{ net.Listener }

func (l retryListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil && (errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		return c, err
	}
}

// makeBody returns n printable bytes ending in a newline (when n > 0).
func makeBody(n int) []byte {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[i%len(alphabet)]
	}
	if n > 0 {
		b[n-1] = '\n'
	}
	return b
}
