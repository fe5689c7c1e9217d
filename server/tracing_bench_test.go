package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/server"
)

// BenchmarkProxyPathTraced is BenchmarkProxyPath/wrk with spans exported
// over OTLP/HTTP to a loopback collector that reads and discards them,
// by sample. ns/op is the request path on the loop; cpu-ns/op is the
// whole process's CPU per request (getrusage): the request path, the
// exporter's workers encoding and sending, and the collector's reading.
// "off" is the gateway without a tracing section.
func BenchmarkProxyPathTraced(b *testing.B) {
	var received atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		received.Add(n)
	}))
	defer sink.Close()
	for _, tc := range []struct{ name, tracing string }{
		{"off", ""},
		{"sample=0", "0"},
		{"sample=0.1", "0.1"},
		{"sample=1", "1"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			doc := gatewaytest.OneService
			if tc.tracing != "" {
				doc += "tracing: {otlp: {endpoint: '" + sink.URL + "', protocol: http, queue: 8192}, sample: " + tc.tracing + "}\n"
			}
			f, err := config.Parse("b", []byte(doc), func(string) (string, bool) { return "10.0.0.1:80", true })
			if err != nil {
				b.Fatal(err)
			}
			f.Defaults()
			comp := config.NewCompiler()
			defer comp.Close()
			snap, err := comp.Compile(f, "b")
			if err != nil {
				b.Fatal(err)
			}
			p := newProxyPathOn(server.NewGateway(snap, nil), proxyPathRequest)
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				if st := p.serve(); st != 200 {
					b.Fatalf("status %d", st)
				}
			}
			comp.Close() // what is queued is sent: its cost is the requests'
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
	if received.Load() == 0 {
		b.Fatal("the collector received nothing")
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
