//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/internal/uring"
)

// scrape reads /metrics and parses it with the Prometheus text parser.
func scrape(t *testing.T, admin string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// sumOf adds the values of a family's samples whose labels include want.
func sumOf(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	var sum float64
next:
	for _, m := range f.Metric {
		for k, v := range want {
			ok := false
			for _, l := range m.Label {
				if l.GetName() == k && l.GetValue() == v {
					ok = true
				}
			}
			if !ok {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

// loadClients is the number of keep-alive clients loading the gateway
// during the drain.
const loadClients = 16

const opsConfig = `
watch: false
shutdown_timeout: 10s
services:
  fast:
    instances: [{addr: "%s"}]
  slow:
    instances: [{addr: "%s"}]
    timeouts: {read: 8s, total: 9s}
routes:
  - {name: slow, priority: 10, match: {prefix: /slow}, service: slow}
  - {name: fast, match: {prefix: /}, service: fast}
`

// TestMetricsScrapeUnderLoad scrapes /metrics while clients load the
// gateway and checks that every scrape parses, and that once the load
// stops the request counter and the latency histogram count exactly the
// requests the clients had answered.
func TestMetricsScrapeUnderLoad(t *testing.T) {
	fast := testutil.StartQuietUpstream(t, "fast")
	slow := testutil.StartQuietUpstream(t, "slow")
	cfg := writeConfig(t, fmt.Sprintf(opsConfig, fast.Addr, slow.Addr))
	addr, admin := freePort(t), freePort(t)
	startProc(t, addr, admin, nil, "run", "-c", cfg)
	l := startLoad(addr, "/m", 8)
	scrapes := 0
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); scrapes++ {
		fams := scrape(t, admin)
		if fams["tollgate_requests_total"] == nil || fams["tollgate_request_duration_seconds"] == nil {
			t.Fatal("request families missing during load")
		}
		time.Sleep(100 * time.Millisecond)
	}
	l.finish()
	sent := float64(l.ok.Load() + l.non2xx.Load())
	if l.errs.Load() != 0 || sent < 1000 {
		t.Fatalf("load: %s", l.summary())
	}
	fams := scrape(t, admin)
	got := sumOf(fams, "tollgate_requests_total", map[string]string{"route": "fast"})
	hist := sumOf(fams, "tollgate_request_duration_seconds", map[string]string{"route": "fast"})
	ok := sumOf(fams, "tollgate_requests_total", map[string]string{"route": "fast", "class": "2xx"})
	up := sumOf(fams, "tollgate_upstream_requests_total", map[string]string{"service": "fast", "result": "ok"})
	t.Logf("%d scrapes during load; clients got %v answers; metrics: requests %v, 2xx %v, histogram %v, upstream ok %v",
		scrapes, sent, got, ok, hist, up)
	if diff := got - sent; diff < 0 || diff > sent*0.001 {
		t.Fatalf("tollgate_requests_total{route=fast} = %v, clients got %v answers", got, sent)
	}
	if hist != got || ok != float64(l.ok.Load()) || up != ok {
		t.Fatalf("histogram count %v, 2xx %v, upstream ok %v; want %v, %v, %v", hist, ok, up, got, l.ok.Load(), ok)
	}
	for _, name := range []string{"tollgate_client_connections", "tollgate_upstream_instance_up", "tollgate_config_version",
		"tollgate_access_log_dropped_total", "go_goroutines", "tollgate_upstream_duration_seconds", "tollgate_ready"} {
		if fams[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
}

// TestAdminRefusesPublicAddressWithoutToken: an admin listener other hosts
// can reach needs a token, or the gateway does not start.
func TestAdminRefusesPublicAddressWithoutToken(t *testing.T) {
	up := testutil.StartQuietUpstream(t, "x")
	cfg := writeConfig(t, fmt.Sprintf(opsConfig, up.Addr, up.Addr))
	_, port, _ := net.SplitHostPort(freePort(t))
	cmd := execGateway(cfg, "TOLLGATE_LISTEN="+freePort(t), "TOLLGATE_ADMIN_LISTEN=0.0.0.0:"+port)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "non-loopback address without a token") {
		t.Fatalf("started on a public admin address without a token: %v\n%s", err, out)
	}
	// With a token it starts, and the token guards everything but the
	// probes and the metrics.
	admin := "127.0.0.1:" + port
	startProc(t, freePort(t), "0.0.0.0:"+port, []string{"TOLLGATE_ADMIN_TOKEN=tok"}, "run", "-c", cfg)
	for _, c := range []struct {
		path string
		want int
	}{{"/admin/config", 401}, {"/admin/stats", 401}, {"/dashboard", 401}, {"/metrics", 200}, {"/readyz", 200}, {"/healthz", 200}} {
		if st, _ := testutil.Get(t, "http://"+admin+c.path); st != c.want {
			t.Errorf("GET %s: %d, want %d", c.path, st, c.want)
		}
	}
}

func execGateway(cfg string, env ...string) *exec.Cmd {
	cmd := exec.Command(binary, "run", "-c", cfg)
	cmd.Env = append(append(os.Environ(), "TOLLGATE_ACCESS_LOG=off"), env...)
	return cmd
}

// drainClient is one keep-alive client of the load during a drain. It
// tells apart connections refused before a request was sent (the listener
// was closed: fine, a balancer retries elsewhere) from requests sent that
// got no answer (a failure).
type drainStats struct {
	ok, refusedBefore, failedAfter, closes atomic.Int64
	lastErr                                atomic.Value
}

func drainClient(addr string, stop <-chan struct{}, st *drainStats, wg *sync.WaitGroup) {
	defer wg.Done()
	req := []byte("GET /fast HTTP/1.1\r\nHost: gw\r\n\r\n")
	var conn net.Conn
	var br *bufio.Reader
	for {
		select {
		case <-stop:
			if conn != nil {
				conn.Close()
			}
			return
		default:
		}
		if conn == nil {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				st.refusedBefore.Add(1)
				time.Sleep(5 * time.Millisecond)
				continue
			}
			conn, br = c, bufio.NewReader(c)
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write(req); err != nil {
			st.refusedBefore.Add(1) // nothing was sent
			conn.Close()
			conn = nil
			continue
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			// A keep-alive connection the server closed while idle reads EOF
			// with none of the request consumed; anything else is a request
			// lost.
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
				st.lastErr.Store(err.Error())
			}
			st.failedAfter.Add(1)
			st.lastErr.Store(err.Error())
			conn.Close()
			conn = nil
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			st.ok.Add(1)
		} else {
			st.failedAfter.Add(1)
			st.lastErr.Store("status " + strconv.Itoa(resp.StatusCode))
		}
		if resp.Close {
			st.closes.Add(1)
			conn.Close()
			conn = nil
		}
	}
}

// TestDrainUnderLoad: SIGTERM with 200 slow requests in flight and
// keep-alive clients loading the gateway. /readyz turns 503 at once, the
// listener closes, every request in flight is answered, keep-alive clients
// get Connection: close, the access log is flushed whole, the process
// exits 0 within shutdown_timeout; before that, a reload under load leaves
// the goroutine count where it was.
func TestDrainUnderLoad(t *testing.T) {
	for _, transport := range []string{"netpoll", "fasthttp"} {
		t.Run(transport, func(t *testing.T) { testDrain(t, transport) })
	}
}

func testDrain(t *testing.T, transport string) {
	fast := testutil.StartQuietUpstream(t, "fast")
	slow := testutil.StartQuietUpstream(t, "slow")
	cfg := writeConfig(t, fmt.Sprintf(opsConfig, fast.Addr, slow.Addr))
	logPath := filepath.Join(t.TempDir(), "access.log")
	addr, admin := freePort(t), freePort(t)
	p := startProc(t, addr, admin, []string{"TOLLGATE_TRANSPORT=" + transport, "TOLLGATE_ACCESS_LOG=" + logPath}, "run", "-c", cfg)

	goroutines := func() int {
		_, body := testutil.Get(t, "http://"+admin+"/debug/goroutines")
		n, _ := strconv.Atoi(strings.TrimSpace(body))
		return n
	}
	if st, _ := testutil.Get(t, "http://"+admin+"/readyz"); st != 200 {
		t.Fatalf("readyz before the drain: %d", st)
	}
	base := goroutines()
	edit := 0

	// Load with a reload in the middle, twice; each time the clients close
	// their connections at the end. The goroutine count must not grow from
	// one round to the next (fasthttp keeps idle workers for 10s, so the
	// first round may leave some), and must be back to its base on netpoll
	// once its idle workers retired.
	var pre drainStats
	round := func() int {
		stopPre := make(chan struct{})
		var preWG sync.WaitGroup
		for range 8 {
			preWG.Add(1)
			go drainClient(addr, stopPre, &pre, &preWG)
		}
		time.Sleep(250 * time.Millisecond)
		edit++
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf(opsConfig, fast.Addr, slow.Addr)+strings.Repeat("\n", edit)), 0o600); err != nil {
			t.Fatal(err)
		}
		_ = p.cmd.Process.Signal(syscall.SIGHUP)
		time.Sleep(250 * time.Millisecond)
		close(stopPre)
		preWG.Wait()
		// Idle serving goroutines retire within about 1.25 s on netpoll.
		n := goroutines()
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && n > base+4; n = goroutines() {
			time.Sleep(100 * time.Millisecond)
		}
		return n
	}
	first := round()
	second := round()
	if pre.failedAfter.Load() != 0 || pre.refusedBefore.Load() != 0 || pre.ok.Load() < 100 {
		t.Fatalf("load across reloads: %d ok, %d refused, %d failed", pre.ok.Load(), pre.refusedBefore.Load(), pre.failedAfter.Load())
	}
	t.Logf("goroutines: %d at the start, %d after a round of load and a reload, %d after another", base, first, second)
	if second > first+2 || (transport == "netpoll" && second > base+4) {
		t.Fatalf("goroutines grow: %d at the start, %d after one round, %d after two", base, first, second)
	}
	testutil.Eventually(t, 3*time.Second, "config version 3", func() bool {
		_, body := testutil.Get(t, "http://"+admin+"/admin/config")
		return strings.Contains(body, `"version":3`)
	})

	// 200 slow requests in flight, each on its own connection.
	slow.Close()
	slowUp := startDelayedUpstream(t, 1500*time.Millisecond)
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(opsConfig, fast.Addr, slowUp)), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGHUP)
	testutil.Eventually(t, 3*time.Second, "config version 4", func() bool {
		_, body := testutil.Get(t, "http://"+admin+"/admin/config")
		return strings.Contains(body, `"version":4`)
	})
	const inFlight = 200
	results := make(chan error, inFlight)
	for range inFlight {
		go func() { results <- slowRequest(addr) }()
	}
	stop := make(chan struct{})
	var st drainStats
	var wg sync.WaitGroup
	for range loadClients {
		wg.Add(1)
		go drainClient(addr, stop, &st, &wg)
	}
	testutil.Eventually(t, 5*time.Second, "requests in flight", func() bool { return countInFlight(t, admin) >= inFlight })
	okBefore := st.ok.Load()

	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// /readyz says 503 at once, while the drain goes on.
	testutil.Eventually(t, 200*time.Millisecond, "/readyz 503", func() bool {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 503
	})
	readyAfter := time.Since(start)
	failed := 0
	for range inFlight {
		if err := <-results; err != nil {
			failed++
			t.Logf("slow request: %v", err)
		}
	}
	var exitErr error
	select {
	case exitErr = <-p.done:
		p.done <- exitErr
	case <-time.After(10 * time.Second):
		t.Fatal("the gateway did not exit within shutdown_timeout")
	}
	drained := time.Since(start)
	close(stop)
	wg.Wait()
	t.Logf("%s: readyz 503 after %v; drained and exited after %v; in flight: %d of %d failed; load: %d ok before SIGTERM, %d ok in all, %d Connection: close, %d refused before sending, %d failed after sending (%v)",
		transport, readyAfter.Round(time.Millisecond), drained.Round(time.Millisecond), failed, inFlight, okBefore, st.ok.Load(), st.closes.Load(),
		st.refusedBefore.Load(), st.failedAfter.Load(), st.lastErr.Load())
	if exitErr != nil {
		t.Fatalf("exit: %v", exitErr)
	}
	if failed != 0 {
		t.Fatalf("%d of %d requests in flight failed during the drain", failed, inFlight)
	}
	// The load's clients behave like wrk, not like a balancer: they ignore
	// /readyz and dial again at once. The netpoll transport shrinks its
	// accept queue, accepts what the kernel queued, serves requests already
	// waiting and closes idle connections only after they stayed silent a
	// moment; a connection the kernel completes in the instant between the
	// last accept and the close can still be reset after its request was
	// sent (0 in most runs, 1 now and then; fasthttp.Server's own shutdown
	// loses a few more). Each client can lose at most that one request:
	// that bound is checked, and the count logged.
	if n := st.failedAfter.Load(); n > int64(loadClients) {
		t.Fatalf("%d load requests were sent and got no answer during the drain, more than one per client (last: %v)", n, st.lastErr.Load())
	} else if n > 0 {
		t.Logf("%s: %d requests sent on connections completed just as the listener closed", transport, n)
	}
	if st.closes.Load() == 0 {
		t.Fatal("no keep-alive client was told Connection: close")
	}
	if !strings.Contains(p.stderr.String(), "stopped cleanly") {
		t.Fatalf("no clean stop logged:\n%s", p.stderr.String())
	}
	// Every answered request is in the access log: the drain flushed it.
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := int64(bytes.Count(b, []byte("\n")))
	if want := pre.ok.Load() + inFlight + st.ok.Load(); lines != want {
		t.Fatalf("access log has %d lines, clients got %d answers", lines, want)
	}
}

// slowRequest sends one request to the slow route on its own connection.
func slowRequest(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("GET /slow HTTP/1.1\r\nHost: gw\r\n\r\n")); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "slow" {
		return fmt.Errorf("status %d %q", resp.StatusCode, body)
	}
	return nil
}

// startDelayedUpstream answers "slow" after d, to any number of
// concurrent requests.
func startDelayedUpstream(t *testing.T, d time.Duration) string {
	t.Helper()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(d)
		_, _ = w.Write([]byte("slow"))
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func countInFlight(t *testing.T, admin string) int {
	fams := scrape(t, admin)
	return int(sumOf(fams, "tollgate_upstream_in_flight", map[string]string{"service": "slow"}))
}

// TestIOUringSetting: how the event loops make their socket calls is the
// operator's to choose, and the gateway says which it uses: in the start
// log and in /metrics. "on" on a kernel that refuses a ring does not start.
func TestIOUringSetting(t *testing.T) {
	up := testutil.StartQuietUpstream(t, "x")
	cfg := writeConfig(t, fmt.Sprintf(opsConfig, up.Addr, up.Addr))
	started := func(p *proc) string {
		t.Helper()
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			out := p.stderr.String()
			if i := strings.Index(out, `"socket_calls":"`); i >= 0 {
				rest := out[i+len(`"socket_calls":"`):]
				return rest[:strings.IndexByte(rest, '"')]
			}
		}
		t.Fatalf("no socket_calls in the start log:\n%s", p.stderr.String())
		return ""
	}
	check := func(p *proc, loops float64) {
		t.Helper()
		for i := range 20 {
			if st, body := testutil.Get(t, fmt.Sprintf("http://%s/fast/%d", p.addr, i)); st != 200 || body != "x" {
				t.Fatalf("GET: %d %q", st, body)
			}
		}
		if got := sumOf(scrape(t, p.admin), "tollgate_io_uring_loops", nil); got != loops {
			t.Fatalf("tollgate_io_uring_loops = %v, want %v", got, loops)
		}
	}

	off := startProc(t, "", "", []string{"TOLLGATE_IO_URING=off", "TOLLGATE_WORKERS=2"}, "run", "-c", cfg)
	if got := started(off); got != "one syscall each (io_uring: off)" {
		t.Fatalf("off: socket_calls %q", got)
	}
	check(off, 0)

	r, ringErr := uring.New(8)
	if ringErr == nil {
		r.Close()
		on := startProc(t, "", "", []string{"TOLLGATE_IO_URING=on", "TOLLGATE_WORKERS=2"}, "run", "-c", cfg)
		if got := started(on); got != "in batches through io_uring" {
			t.Fatalf("on: socket_calls %q", got)
		}
		check(on, 2)
	} else {
		out, err := execGateway(cfg, "TOLLGATE_LISTEN="+freePort(t), "TOLLGATE_ADMIN_LISTEN="+freePort(t),
			"TOLLGATE_IO_URING=on").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "io_uring: on:") {
			t.Fatalf("started with io_uring: on where the kernel refuses a ring (%v): %v\n%s", ringErr, err, out)
		}
		auto := startProc(t, "", "", nil, "run", "-c", cfg)
		if got := started(auto); !strings.HasPrefix(got, "one syscall each (io_uring unavailable") {
			t.Fatalf("auto without io_uring: socket_calls %q", got)
		}
		check(auto, 0)
	}

	out, err := execGateway(cfg, "TOLLGATE_LISTEN="+freePort(t), "TOLLGATE_IO_URING=sometimes").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `io_uring "sometimes": want auto, on or off`) {
		t.Fatalf("io_uring: sometimes: %v\n%s", err, out)
	}
}
