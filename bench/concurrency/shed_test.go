package concurrency_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/gatewaytest"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/valyala/fasthttp"
)

// One event loop, three routes to a fast backend that differ only in
// importance, and shedding on at the default thresholds. Each route's WAF
// reads the JSON body the clients send, so that a request the loop admits
// costs it far more than one it sheds, as a gateway's filters do (and the
// generator on the same machine can offer twice what the loop can do).
const shedConfig = `
workers: 1
overload: {lag: {}}
services:
  up:
    instances: [{addr: "${UP}"}]
routes:
  - {name: critical, match: {prefix: /c}, service: up, importance: critical, waf: {}}
  - {name: normal, match: {prefix: /n}, service: up, waf: {}}
  - {name: low, match: {prefix: /l}, service: up, importance: low, waf: {}}
`

// closedLoopRate is how many requests a second the gateway answers on
// path to conns clients that each send the next as soon as the last is
// answered: what it can do.
func closedLoopRate(tb testing.TB, addr, path string, conns int, d time.Duration, prepare func(*fasthttp.Request)) float64 {
	tb.Helper()
	client := &fasthttp.HostClient{Addr: addr, MaxConns: conns}
	var done atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			prepare(req)
			req.SetRequestURI("http://" + addr + path)
			for time.Now().Before(deadline) {
				if err := client.DoTimeout(req, resp, 5*time.Second); err == nil && resp.StatusCode() == 200 {
					done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return float64(done.Load()) / d.Seconds()
}

// TestShedLowImportanceFirst: offered twice what the gateway's one event
// loop can do, half of it to a low-importance route, three in ten to a
// normal one and two in ten to a critical one, the loop's lag sheds low
// requests first; critical ones keep being answered, and fast. The bounds
// are looser than the figures in bench/RESULTS.md.
func TestShedLowImportanceFirst(t *testing.T) {
	loadTest(t)
	up := testutil.StartQuietUpstream(t, strings.Repeat("x", 2048))
	gw := gatewaytest.Start(t, shedConfig, gatewaytest.Options{Vars: map[string]string{"UP": up.Addr}})
	capacity := closedLoopRate(t, gw.Addr, "/c", 64, 1500*time.Millisecond, postOrder)
	d := 4 * time.Second
	if figuresWanted {
		d = 10 * time.Second
	}
	paths := []string{"/c", "/n", "/l"}
	pick := func(i int64) int {
		switch i % 10 {
		case 0, 5:
			return 0
		case 1, 4, 7:
			return 1
		}
		return 2
	}
	rs := offerMixed(t, gw.Addr, paths, pick, postOrder, 2*capacity, d, 256, 5*time.Second, nil)
	t.Logf("one loop answers %.0f req/s closed loop; offered %.0f req/s", capacity, 2*capacity)
	names := []string{"critical", "normal", "low"}
	shedShare := make([]float64, 3)
	for i, r := range rs {
		shedShare[i] = float64(r.Refused) / float64(max(1, r.Sent))
		t.Logf("| %s | %d | %.1f %% | %.1f %% | %d | %s | %s | %s |", names[i], r.Sent, 100*float64(r.OK)/float64(max(1, r.Sent)),
			100*shedShare[i], r.Other, ms(quantile(r.OKLatency, 0.5)), ms(quantile(r.OKLatency, 0.99)), ms(quantile(r.Refusal, 0.99)))
	}
	crit := rs[0]
	if ok := float64(crit.OK) / float64(crit.Sent); ok < 0.85 {
		t.Errorf("critical requests answered: %.1f %%, want nearly all", 100*ok)
	}
	// The generator, the backend and the gateway share the machine's
	// cores here, so the latency bound is only a sanity check; the
	// figures in bench/RESULTS.md come from a quiet machine.
	if p := quantile(crit.OKLatency, 0.5); p > 250*time.Millisecond {
		t.Errorf("critical median %s", p)
	}
	if rs[2].Refused == 0 || shedShare[2] < shedShare[1] || shedShare[1] < shedShare[0] {
		t.Errorf("shed shares critical %.3f, normal %.3f, low %.3f: want low shed first, critical last", shedShare[0], shedShare[1], shedShare[2])
	}
}

// orderBody is a JSON order of a hundred and fifty lines, every string
// of which the WAF checks; fifteen under the race detector, which makes
// each check ten times as slow.
var orderBody = func() []byte {
	lines := 300
	if testutil.Race {
		lines = 30
	}
	var b strings.Builder
	b.WriteString(`{"order":"A-1","lines":[`)
	for i := range lines {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"sku":"SKU-%05d","name":"Blue cotton shirt, size %d","note":"gift wrap please"}`, i, i%5)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}()

func postOrder(req *fasthttp.Request) {
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.SetBody(orderBody)
}
