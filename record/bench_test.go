package record

import (
	"github.com/tollgate/tollgate/internal/gatewaytest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/valyala/fasthttp"
)

// BenchmarkRecordPath is the recording step's cost on the request path
// (Handle and HandleResponse), for a JSON POST with a 1 KiB body and a
// 1 KiB answer: switched off, not sampled, sampled and written to disk,
// and sampled with the writer's queue full.
func BenchmarkRecordPath(b *testing.B) {
	req, resp := benchRequest(b)
	off := false
	masks := []string{"query.card_no", "json.card.number"}
	for _, bc := range []struct {
		name  string
		rule  Rule
		write bool
	}{
		{"off", Rule{On: &off}, false},
		{"unsampled", Rule{Sample: 1e-15, Mask: masks}, false},
		{"sample=1", Rule{Mask: masks}, true},
		{"sample=1,queue-full", Rule{Mask: masks}, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r, _ := testRecorder(b, bc.rule)
			if bc.write {
				r.w = newWriter(Settings{Dir: b.TempDir()}.withDefaults(), nil, time.Now)
				defer r.w.Close()
			} else {
				r.w = &Writer{queue: make(chan *entry)}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				serveOnce(r, req, resp)
			}
			b.StopTimer()
			if queued, dropped := r.Counts(); queued+dropped > 0 {
				b.ReportMetric(float64(dropped)/float64(queued+dropped), "dropped/op")
			}
		})
	}
}

// BenchmarkGatewayRecording drives a real gateway over loopback (8
// keep-alive clients, a POST with a 1 KiB body, a 1 KiB answer) with
// recording off, with every request recorded, and with every request
// recorded while the disk writer is stuck; it reports throughput and the
// p99 the clients saw. Run it alone: go test -run '^$' -bench Gateway
// -benchtime 20000x ./record/
func BenchmarkGatewayRecording(b *testing.B) {
	up := testutil.StartQuietUpstream(b, strings.Repeat("a", 1024))
	body := strings.Repeat("b", 1024)
	post := func(_ int, req *fasthttp.Request) {
		req.Header.SetMethod("POST")
		req.SetRequestURI("/orders?x=1")
		req.Header.SetHost("api.test")
		req.Header.SetContentType("application/json")
		req.SetBodyString(`{"pad":"` + body + `"}`)
	}
	for _, bc := range []struct {
		name, yaml string
		stall      bool
	}{
		{"off", oneRoute, false},
		{"sample=1", recordConfig, false},
		{"sample=1,writer-stalled", recordConfig, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if bc.stall {
				release := stallWriter(b)
				defer release()
			}
			g := startGateway(b, bc.yaml, map[string]string{"UP": up.Addr, "DIR": b.TempDir(), "Q": "1024"})
			gatewaytest.Drive(b, g.Addr, 2000, 8, post) // warm the pools
			b.ResetTimer()
			start := time.Now()
			res := gatewaytest.Drive(b, g.Addr, b.N, 8, post)
			took := time.Since(start)
			b.StopTimer()
			if res.Errors > 0 || res.Statuses[200] != b.N {
				b.Fatalf("statuses %v, %d errors", res.Statuses, res.Errors)
			}
			b.ReportMetric(float64(b.N)/took.Seconds(), "req/s")
			b.ReportMetric(float64(res.P99().Microseconds()), "p99-µs")
		})
	}
}
